"""A run as a report, from its journal alone (no server is contacted): :mod:`runner.report.model` folds the
events into a :class:`~runner.report.model.RunReportModel` (steps, items, lanes of calls per server over time,
failures grouped, the items in doubt); :mod:`~runner.report.junit`, :mod:`~runner.report.markdown` and
:mod:`~runner.report.html` render it. Pure: the renderers return text, the CLI writes it.
"""
