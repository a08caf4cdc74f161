"""The pure core of the engine: a run's events, their one fold, how a run ended, and the decisions both executors
make (which run continues, whether a step starts, what a step's items do). No I/O: no trio, no files."""
