"""One item's tool call: its arguments, the check against the server's tools, its attempts (the retry rule), and
a call the server takes as a task."""
