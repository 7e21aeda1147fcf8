"""The adaptive level of an exported OpenEnv server (stdlib only): a sliding window of rewards per level.

One ``Curriculum`` per server process, shared by every session. An adaptive episode is played at the current
level; its reward (once it ends) goes into that level's window, the last ``window`` rewards. When the current
level's window is full and its mean reaches ``up`` (default 0.7) the level moves up to the next level that holds
sampled tasks; when the mean falls under ``down`` (default 0.2) it moves down (RLVE's rule). A move empties the
windows of both levels, so the next move is decided on episodes played after it. Rewards of episodes started at
another level (before a move, by another session) go to their own level's window and move nothing.

Configured by the server's environment: ``ENVFOUNDRY_ADAPTIVE_WINDOW`` (default 8), ``ENVFOUNDRY_ADAPTIVE_UP``
(0.7), ``ENVFOUNDRY_ADAPTIVE_DOWN`` (0.2), ``ENVFOUNDRY_ADAPTIVE_START`` (the level to start at; default the
lowest level with sampled tasks).
"""

import os
import threading
from collections import deque

WINDOW, UP, DOWN = 8, 0.7, 0.2


class CurriculumError(ValueError):
    """A bad setting of the adaptive level; the message names it."""


class Curriculum:
    def __init__(self, levels, window=WINDOW, up=UP, down=DOWN, start=None):
        self.levels = sorted(levels)
        if not self.levels:
            raise CurriculumError("the adaptive level needs sampled tasks: this export has none "
                                  "(export it with envfoundry export --sample-per-level N)")
        if not isinstance(window, int) or window < 1:
            raise CurriculumError(f"ENVFOUNDRY_ADAPTIVE_WINDOW must be an integer of 1 or more, not {window!r}")
        if not 0.0 <= down < up <= 1.0:
            raise CurriculumError(f"the thresholds must satisfy 0 <= ENVFOUNDRY_ADAPTIVE_DOWN < ENVFOUNDRY_ADAPTIVE_UP "
                                  f"<= 1, not down={down!r}, up={up!r}")
        if start is not None and start not in self.levels:
            raise CurriculumError(f"ENVFOUNDRY_ADAPTIVE_START={start!r} is not a level with sampled tasks "
                                  f"(levels: {', '.join(map(str, self.levels))})")
        self.window, self.up, self.down = window, up, down
        self.level = start if start is not None else self.levels[0]
        self.windows = {lvl: deque(maxlen=window) for lvl in self.levels}
        self.episodes = 0
        self.moves = []
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, levels, environ=None):
        environ = os.environ if environ is None else environ

        def number(name, default, kind):
            text = environ.get(name)
            if text is None or text == "":
                return default
            try:
                return kind(text)
            except ValueError:
                raise CurriculumError(f"{name}={text!r} is not a{'n integer' if kind is int else ' number'}") from None

        return cls(levels, window=number("ENVFOUNDRY_ADAPTIVE_WINDOW", WINDOW, int),
                   up=number("ENVFOUNDRY_ADAPTIVE_UP", UP, float), down=number("ENVFOUNDRY_ADAPTIVE_DOWN", DOWN, float),
                   start=number("ENVFOUNDRY_ADAPTIVE_START", None, int))

    def record(self, level, reward):
        """Add an ended episode's reward to ``level``'s window; move the current level when its window says so.
        Returns the move (``{"from", "to", "mean", "episode"}``) or None."""
        with self._lock:
            self.episodes += 1
            win = self.windows.setdefault(level, deque(maxlen=self.window))
            win.append(float(reward))
            if level != self.level or len(win) < self.window:
                return None
            mean = sum(win) / len(win)
            at = self.levels.index(level)
            if mean >= self.up and at + 1 < len(self.levels):
                to = self.levels[at + 1]
            elif mean < self.down and at > 0:
                to = self.levels[at - 1]
            else:
                return None
            move = {"from": level, "to": to, "mean": round(mean, 4), "episode": self.episodes}
            self.moves.append(move)
            self.level = to
            win.clear()
            self.windows[to].clear()
            return move

    def report(self):
        """What ``/state`` shows: the current level, the levels, each window and its mean, the thresholds."""
        with self._lock:
            return {
                "level": self.level,
                "levels": list(self.levels),
                "window": self.window,
                "up": self.up,
                "down": self.down,
                "windows": {str(k): list(v) for k, v in self.windows.items()},
                "means": {str(k): round(sum(v) / len(v), 4) if v else None for k, v in self.windows.items()},
                "episodes": self.episodes,
                "moves": list(self.moves[-20:]),
            }
