"""A policy stand-in for rollout tests: it answers fixed texts in call order."""


class Scripted:
    """A policy stand-in that answers fixed texts in call order (canonical ids + end-of-turn)."""

    def __init__(self, fmt, texts):
        self.fmt, self.texts, self.n = fmt, texts, 0

    def generate(self, prompts, *, max_new_tokens, **_):
        out = []
        for _ in prompts:
            ids = self.fmt.encode_content(self.texts[self.n % len(self.texts)])[: max_new_tokens - 1] + [
                self.fmt.assistant_suffix[0]
            ]
            self.n += 1
            out.append(ids)
        return out, [[0.0] * len(i) for i in out]
