"""v2.x's `call_subordinate`, in place of v1.7's: the subordinate runs in a child chat of its own.

As v2.x does: a new `Agent(superior.number + 1, config)` given no context makes one (a USER chat
whose agent 0 is the subordinate); the child chat names its parent in its output data and takes its
project; the subordinate's `_superior` is the calling agent. The assignment reaches it through
`hist_add_user_message`, never through `AgentContext.communicate`.

Assumed (v2.x's source does not show it): while the subordinate runs, its child chat counts as
busy, so what the human types there arrives as an intervention, as in a chat whose agent runs.
"""

from agent import Agent, UserMessage
from helpers import projects
from helpers.tool import Response, Tool
from initialize import initialize_agent
from usr.plugins.v2x_children import children


class Delegation(Tool):
    async def execute(self, message="", profile="", **kwargs):
        superior = self.agent
        subordinate = children.child_of(superior)
        if subordinate is None:
            subordinate = _new_subordinate(superior, profile)
        child = subordinate.context
        child.task = superior.context.task  # busy while it runs (the assumption above)
        try:
            subordinate.hist_add_user_message(UserMessage(message=message, attachments=[]))
            result = await subordinate.monologue()
            subordinate.history.new_topic()
        finally:
            child.task = None
        return Response(message=result, break_loop=False)


def _new_subordinate(superior, profile: str):
    config = initialize_agent()
    if profile:
        config.profile = profile
    subordinate = Agent(superior.number + 1, config)  # no context given: a child chat of its own
    child = subordinate.context
    child.set_output_data(children.PARENT_CONTEXT_ID, superior.context.id)
    project = projects.get_context_project_name(superior.context)
    if project:
        projects.activate_project(child.id, project, mark_dirty=False)
    subordinate.set_data(children.SUPERIOR, superior)
    superior.set_data(children.CHILD, subordinate)
    return subordinate
