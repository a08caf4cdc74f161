"""Showing a run: its words and numbers (:mod:`runner.view.text`), plain lines, the live terminal view."""
