"""v2.x's `parallel` for plain tool calls: each runs in a throwaway BACKGROUND chat of its own.

As v2.x's direct tool jobs do: the worker chat copies the caller's config and project, names the
calling chat in its data (`_parallel_parent_context_id`), its agent 0 runs the tool, and the chat
is removed afterwards. v2.x starts the jobs in the background and collects them later; here they
run one after the other within the call, which changes nothing about whose chat they work for.
`children.PARALLEL_LINK` switches the link to the agent's `_superior`, or off.
"""

import json

from agent import AgentContext, AgentContextType, LoopData
from helpers import projects
from helpers.tool import Response, Tool
from usr.plugins.v2x_children import children


class Parallel(Tool):
    async def execute(self, tool_calls=None, **kwargs):
        results = []
        for call in tool_calls or []:
            results.append({"tool_name": call["tool_name"],
                            "result": await self._run(call["tool_name"], call["tool_args"])})
        return Response(message=json.dumps(results), break_loop=False)

    async def _run(self, name: str, args: dict) -> str:
        caller = self.agent.context
        worker = AgentContext(config=caller.config, name=f"parallel:{name}",
                              type=AgentContextType.BACKGROUND)
        children.WORKERS.append(worker.id)
        try:
            way = children.PARALLEL_LINK["way"]
            if way == "parallel_parent":
                worker.set_data(children.PARALLEL_PARENT, caller.id)
            elif way == "superior":
                worker.agent0.set_data(children.SUPERIOR, self.agent)
            project = projects.get_context_project_name(caller)
            if project:
                projects.activate_project(worker.id, project, mark_dirty=False)
            agent = worker.agent0
            agent.loop_data = LoopData()
            tool = agent.get_tool(name=name, method=None, args=args, loop_data=agent.loop_data,
                                  message=json.dumps({"tool_name": name, "tool_args": args}))
            return (await tool.execute(**args)).message
        finally:
            AgentContext.remove(worker.id)
