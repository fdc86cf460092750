"""An empty hook where the Honcho plugin captures the typed message (sorted right after its
_50_honcho_capture_user, inside the timing marks): the baseline of bench/a0_turn.py."""

from helpers.extension import Extension


class BenchEmptyUserHook(Extension):
    def execute(self, data=None, **kwargs):
        return None
