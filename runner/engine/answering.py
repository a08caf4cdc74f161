"""Each server's answer policy (:mod:`runner.session.answers`), from the workflow and the command line.

``--elicitation`` wins over a server's ``elicitation:``; ``roots:`` are resolved from the workflow's folder.
"""

from __future__ import annotations

from runner.engine.runctl import workflow_folder
from runner.session.answers import AnswerPolicy, make_policy, roots_from_config
from runner.workflow.plan import Plan

__all__ = ["answer_policy"]


def answer_policy(plan: Plan, name: str, elicitation: str | None = None) -> AnswerPolicy:
    """What server ``name``'s own requests get: ``elicitation`` (``--elicitation``) overrides the server's."""
    server = plan.servers[name].server
    roots = roots_from_config(tuple(server.roots), workflow_folder(plan)) if server.roots else ()
    return make_policy(elicitation if elicitation is not None else server.elicitation, roots)
