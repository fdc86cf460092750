"""Before v1.7's `hist_add_ai_response`: take the `llm_result` v2.x passes out of the call (v1.7's
method does not accept it) and keep it for the end extension.

v1.7's message loop passes none: its call (the only one with an `id` keyword; a partial answer
and the greeting have none) gets what v2.x's loop passes in Responses mode, when the chat's test
switch says the model answers in that mode.
"""

from helpers.extension import Extension
from usr.plugins.v2x_emulation import v2x


class V2xSetLlmResultAside(Extension):
    def execute(self, data=None, **kwargs):
        call = data["kwargs"]
        result = call.pop("llm_result", None)
        if result is None and "id" in call and v2x.switch(self.agent, v2x.API_MODE) == "responses":
            args = data["args"]
            result = v2x.model_result(args[1] if len(args) > 1 else call.get("message", ""))
        data[v2x.SET_ASIDE] = result
