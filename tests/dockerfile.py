"""A small reader of the Dockerfile, for tests that hold other things to it (no Docker engine).

Why: no container engine runs the tests, yet two kinds of test depend on what the Dockerfile
says: the parser-level checks of tests/unit/deploy/test_dockerfile.py, and the control-plane
fixture that runs the controller with the controller image's environment
(``tests.controlplane.controller``). Both read it here, one parser, no new dependency.

``parse(text)`` joins continuation lines, drops comments and groups the instructions by stage.
``Dockerfile.environment(stage, base_env)`` is what the stage's containers start with: the
``ENV`` of the stage and of the stages it is built ``FROM``, over ``base_env`` (what the
external base image sets, which the Dockerfile does not say), and the final ``WORKDIR``.
``ENV`` is read as Docker reads it: ``key=value`` pairs (or the legacy ``ENV key value``),
single and double quotes, backslash escapes, ``$VAR`` and ``${VAR}`` substituted with the
values from *before* the instruction (Docker uses one value per variable throughout an
instruction), an unset variable as the empty string. ``${VAR:-word}`` and ``${VAR:+word}``
are understood; any other modifier is refused rather than guessed.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [a for k, a in self.instructions if k == keyword]


@dataclass
class Image:
    """What a stage's containers start with: environment, working directory, entrypoint."""

    env: dict[str, str]
    workdir: str
    entrypoint: list[str]


@dataclass
class Dockerfile:
    global_args: dict[str, str]
    stages: dict[str, Stage]

    def environment(self, name: str, base_env: Mapping[str, str] | None = None) -> Image:
        """The environment, WORKDIR (``/`` when none) and exec-form ENTRYPOINT of stage
        ``name``, built on ``base_env`` when its chain of stages starts at an external image."""
        stage = self.stages[name]
        base = resolve(stage.base, self.global_args)
        if base in self.stages:
            image = self.environment(base, base_env)
        else:
            image = Image(dict(base_env or {}), "/", [])
        env, workdir, entrypoint = dict(image.env), image.workdir, list(image.entrypoint)
        for keyword, rest in stage.instructions:
            if keyword == "ENV":
                env |= env_pairs(rest, env)
            elif keyword == "WORKDIR":
                (path,) = words(rest, env)
                workdir = posixpath.normpath(posixpath.join(workdir, path))
            elif keyword == "ENTRYPOINT":
                form = json.loads(rest)
                if not isinstance(form, list):
                    raise ValueError(f"{name}: ENTRYPOINT is not in the exec form: {rest}")
                entrypoint = [str(x) for x in form]
        return Image(env, workdir, entrypoint)


def parse(text: str) -> Dockerfile:
    """Instructions with line continuations joined and comments dropped, grouped by stage."""
    logical: list[str] = []
    current = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue  # a comment, also one inside a continued instruction
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        if current.strip():
            logical.append(current.strip())
        current = ""
    global_args: dict[str, str] = {}
    stages: dict[str, Stage] = {}
    stage: Stage | None = None
    for item in logical:
        keyword, _, rest = item.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            parts = rest.split()
            assert len(parts) == 3 and parts[1].upper() == "AS", f"unnamed stage: {item}"
            stage = Stage(base=parts[0], name=parts[2])
            stages[stage.name] = stage
        elif stage is None:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            name, _, default = rest.partition("=")
            global_args[name] = default
        else:
            stage.instructions.append((keyword, rest.strip()))
    return Dockerfile(global_args, stages)


def resolve(ref: str, args: Mapping[str, str]) -> str:
    """``${NAME}`` in a FROM line replaced by the global ARG's default."""
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], ref)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _substitute(text: str, i: int, env: Mapping[str, str]) -> tuple[str, int]:
    """The value of the variable reference starting at ``text[i] == "$"``, and where it ends."""
    if i + 1 < len(text) and text[i + 1] == "{":
        end = text.find("}", i + 2)
        if end < 0:
            raise ValueError(f"unclosed ${{ in {text!r}")
        inner = text[i + 2 : end]
        m = _NAME.match(inner)
        if m is None:
            raise ValueError(f"bad variable reference ${{{inner}}}")
        name, modifier = m.group(0), inner[m.end() :]
        value = env.get(name, "")
        if modifier.startswith(":-"):
            value = value or modifier[2:]
        elif modifier.startswith(":+"):
            value = modifier[2:] if value else ""
        elif modifier:
            raise ValueError(f"unsupported modifier in ${{{inner}}}")
        return value, end + 1
    m = _NAME.match(text, i + 1)
    if m is None:
        return "$", i + 1  # a lone dollar stays
    return env.get(m.group(0), ""), m.end()


def words(text: str, env: Mapping[str, str]) -> list[str]:
    """``text`` split into words as Docker splits an ENV or WORKDIR line: whitespace between
    words, quotes and backslashes removed, variables substituted (not inside single quotes)."""
    out: list[str] = []
    word: list[str] = []
    in_word = False
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            if in_word:
                out.append("".join(word))
                word, in_word = [], False
            i += 1
            continue
        in_word = True
        if c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ValueError(f"unclosed ' in {text!r}")
            word.append(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$':
                    word.append(text[i + 1])
                    i += 2
                elif text[i] == "$":
                    value, i = _substitute(text, i, env)
                    word.append(value)
                else:
                    word.append(text[i])
                    i += 1
            if i >= len(text):
                raise ValueError(f'unclosed " in {text!r}')
            i += 1
        elif c == "\\" and i + 1 < len(text):
            word.append(text[i + 1])
            i += 2
        elif c == "$":
            value, i = _substitute(text, i, env)
            word.append(value)
        else:
            word.append(c)
            i += 1
    if in_word:
        out.append("".join(word))
    return out


def env_pairs(rest: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables one ``ENV`` instruction sets; ``env`` is what was set before it."""
    first = rest.split(None, 1)[0] if rest.strip() else ""
    if "=" not in first:  # the legacy form: ENV key the rest of the line
        key, _, value = rest.strip().partition(" ")
        return {key: " ".join(words(value, env))}
    out: dict[str, str] = {}
    for item in words(rest, env):
        key, sep, value = item.partition("=")
        if not sep or not _NAME.fullmatch(key):
            raise ValueError(f"ENV {rest!r}: {item!r} is not key=value")
        out[key] = value
    return out
