"""The engine: a run's events and their fold, the journal, the scheduler and its server links, the lifecycle."""
