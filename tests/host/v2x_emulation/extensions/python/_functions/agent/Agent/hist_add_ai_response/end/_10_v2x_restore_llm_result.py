"""After v1.7's `hist_add_ai_response`, before the plugin's `_50_` extension: the call's
`llm_result` back in `data["kwargs"]`, as v2.x's end extensions see it (absent when the caller
passed none)."""

from helpers.extension import Extension
from usr.plugins.v2x_emulation import v2x


class V2xRestoreLlmResult(Extension):
    def execute(self, data=None, **kwargs):
        result = data.pop(v2x.SET_ASIDE, None)
        if result is not None:
            data["kwargs"]["llm_result"] = result
