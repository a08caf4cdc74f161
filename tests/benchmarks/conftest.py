# The benchmarks are run by `python -m tests.benchmarks`, never by the default pytest run.
collect_ignore_glob = ["*.py"]
