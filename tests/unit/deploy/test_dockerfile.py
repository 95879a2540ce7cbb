"""Parser-level checks of the Dockerfile (no Docker engine here): pinned bases, two final
targets running as numeric non-root users that match the chart and the run manifests, no
build tools or pip left in them, entrypoints that exist in the package, and the paths the Spark
run manifests (launch/manifests.py) expect. Building and running the images needs Docker:
docs/install.md marks those commands."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from tests.dockerfile import Dockerfile, Image, Stage, parse, resolve, words
from txntable.launch import manifests
from txntable.launch.run import RunKind

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "Dockerfile"
FINAL = ("controller", "spark")
BUILD_TOOLS = re.compile(
    r"\b(gcc|g\+\+|clang|make|cmake|build-essential|[a-z0-9.+-]+-dev|git|curl|wget)\b"
)


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse(DOCKERFILE.read_text())


def pinned(image: str) -> bool:
    """A digest, or an exact version tag (x.y.z...), never latest or a floating tag."""
    if re.search(r"@sha256:[0-9a-f]{64}$", image):
        return ":latest" not in image
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    return bool(re.match(r"^v?\d+\.\d+\.\d+", tag))


def test_pinned_checker() -> None:
    assert pinned("python:3.11.14-slim-bookworm")
    assert pinned("python@sha256:" + "a" * 64)
    for floating in ("python", "python:latest", "python:3.11-slim", "python:3", "x/y:stable"):
        assert not pinned(floating), floating


def test_every_base_is_pinned_or_a_stage(dockerfile: Dockerfile) -> None:
    names: set[str] = set()
    for stage in dockerfile.stages.values():
        base = resolve(stage.base, dockerfile.global_args)
        assert "latest" not in base
        assert base in names or pinned(base), f"{stage.name}: {base} is not pinned"
        names.add(stage.name)
    for keyword_args in (s.args("COPY") for s in dockerfile.stages.values()):
        for args in keyword_args:
            source = re.match(r"--from=(\S+)", args)
            if source:
                assert source.group(1) in names, f"COPY from unknown stage {source.group(1)}"


def test_two_targets_and_spark_version(dockerfile: Dockerfile) -> None:
    assert set(FINAL) <= dockerfile.stages.keys()
    # the image runs the Spark the tests run, the version the SparkApplication names
    assert dockerfile.global_args["PYSPARK_VERSION"] == metadata.version("pyspark")


@pytest.mark.parametrize("target", FINAL)
def test_final_stage_user_is_numeric_non_root(dockerfile: Dockerfile, target: str) -> None:
    users = dockerfile.stages[target].args("USER")
    assert users, f"{target} has no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0
    assert not gid or (gid.isdigit() and int(gid) > 0)


def test_users_match_the_chart_and_the_run_pods(dockerfile: Dockerfile) -> None:
    values = yaml.safe_load((REPO / "charts" / "txntable-operator" / "values.yaml").read_text())
    controller_uid = int(dockerfile.stages["controller"].args("USER")[-1].split(":")[0])
    assert controller_uid == values["podSecurityContext"]["runAsUser"]
    spark_uid = int(dockerfile.stages["spark"].args("USER")[-1].split(":")[0])
    assert spark_uid == manifests.SPARK_UID


@pytest.mark.parametrize("target", FINAL)
def test_no_build_tools_in_final_stages(dockerfile: Dockerfile, target: str) -> None:
    stage = dockerfile.stages[target]
    for run in stage.args("RUN"):
        installs = re.findall(r"apt-get install ([^&;]*)", run)
        for packages in installs:
            assert "--no-install-recommends" in packages
            assert not BUILD_TOOLS.search(packages.replace("--no-install-recommends", "")), run
        assert "pip install" not in run, "final stages copy a finished environment"
    # pip and setuptools leave both the base interpreter and the copied environment
    assert any("pip uninstall -y pip setuptools" in r for r in stage.args("RUN"))
    copied = [c for c in stage.args("COPY") if c.startswith("--from=")]
    assert copied, "the environment comes from a build stage"
    for source in (c.split()[0].removeprefix("--from=") for c in copied):
        build = dockerfile.stages[source]
        assert any("pip uninstall -y pip setuptools" in r for r in build.args("RUN"))


def _exec_form(instruction: str) -> list[str]:
    form = json.loads(instruction)
    assert isinstance(form, list), "use the exec form (signals reach the process)"
    return [str(x) for x in form]


def test_controller_entrypoint_is_the_package(dockerfile: Dockerfile) -> None:
    entry = _exec_form(dockerfile.stages["controller"].args("ENTRYPOINT")[-1])
    assert entry == ["python", "-m", "txntable"]
    assert importlib.util.find_spec("txntable.__main__") is not None
    env = " ".join(dockerfile.stages["controller"].args("ENV"))
    assert "PATH=/opt/venv/bin:" in env
    # no Java and no Spark in the controller: its environment lacks the spark extra
    runs = " ".join(
        r for s in ("wheel", "build-controller") for r in dockerfile.stages[s].args("RUN")
    )
    assert "pyspark" not in runs and "openjdk" not in runs
    assert "spark" not in installed_extras(dockerfile.stages["build-controller"])
    assert not any("openjdk" in r for r in dockerfile.stages["controller"].args("RUN"))


def installed_extras(stage: Stage) -> set[str]:
    """The extras of this package a build stage installs: pip install "<the wheel>[a,b]"."""
    runs = " ".join(stage.args("RUN"))
    found = re.findall(r"/wheels/txntable-\*\.whl\)\[([A-Za-z0-9_,-]+)\]", runs)
    assert len(found) == 1, f"{stage.name} must install the wheel once, with its extras"
    assert "--no-deps" not in runs and " -r " not in runs, "dependencies come from the wheel"
    return set(found[0].split(","))


def test_both_images_install_the_object_store_extras_and_only_spark_gets_pyspark(
    dockerfile: Dockerfile,
) -> None:
    """Before: neither image installed boto3, so every s3:// table was Unreachable."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert installed_extras(dockerfile.stages["build-controller"]) == {"s3", "azure"}
    assert installed_extras(dockerfile.stages["build-spark"]) == {"s3", "azure", "spark"}
    assert any(r.startswith("boto3") for r in extras["s3"])
    assert any(r.startswith("azure-storage-blob") for r in extras["azure"])
    assert any(r.startswith("azure-identity") for r in extras["azure"])
    assert any(r.startswith("pyspark") for r in extras["spark"])
    base = " ".join(pyproject["project"]["dependencies"])
    assert "pyspark" not in base and "deltalake" not in base and "boto3" not in base
    # the final images are exactly those environments
    for final, build in (("controller", "build-controller"), ("spark", "build-spark")):
        copies = [c for c in dockerfile.stages[final].args("COPY") if c.startswith("--from=")]
        assert f"--from={build} /opt/venv /opt/venv" in copies
    # the Spark image pins the Spark the tests run (test_two_targets_and_spark_version)
    spark_runs = " ".join(dockerfile.stages["build-spark"].args("RUN"))
    assert '"pyspark==${PYSPARK_VERSION}"' in spark_runs


#: Hadoop's object-store connectors and the SDKs they pull in (jars, Maven coordinates, URLs)
HADOOP_CONNECTORS = re.compile(
    r"hadoop-(aws|azure|azure-datalake|cloud-storage)|aws-java-sdk|awssdk|azure-storage-\d"
    r"|gcs-connector|\.jar\b",
    re.IGNORECASE,
)
#: reading or writing a table with Spark's own readers (Hadoop filesystems) or naming their schemes
SPARK_FILESYSTEM_IO = re.compile(
    r"\bspark\.read\b|\.read\.(parquet|json|format|load|text)\(|"
    r"\.write\.(parquet|json|format|save|mode|insertInto|saveAsTable)\(|s3a://|abfss?://|wasbs?://"
)


def test_spark_jobs_reach_storage_through_the_engine_only(dockerfile: Dockerfile) -> None:
    """ADR 0008: the Spark image carries no Hadoop object-store connector, so no job may read or
    write a table through Spark's Hadoop filesystems (the checkpoint job once read the log with
    spark.read over s3a:// and failed with ClassNotFoundException: S3AFileSystem); Spark tasks
    open tables with the engine's storage instead. If a connector is ever added to the image,
    this test and the ADR change together."""
    for stage in dockerfile.stages.values():
        for keyword, args in stage.instructions:
            assert not HADOOP_CONNECTORS.search(args), f"{stage.name}: {keyword} {args}"
    sources = [
        *sorted((REPO / "operator" / "txntable" / "jobs").glob("*.py")),
        *sorted((REPO / "operator" / "txntable" / "maintenance").glob("*.py")),
    ]
    assert len(sources) > 10
    for path in sources:
        found = SPARK_FILESYSTEM_IO.search(path.read_text())
        assert found is None, f"{path.relative_to(REPO)} uses {found.group(0)!r}"


def test_spark_image_provides_what_the_run_manifests_use(dockerfile: Dockerfile) -> None:
    stage = dockerfile.stages["spark"]
    copies = [shlex.split(c) for c in stage.args("COPY") if not c.startswith("--from=")]
    targets = {dest: src for src, dest in copies}
    # the job programs, one per RunKind, at the path manifests.main_file() names
    for kind in RunKind:
        path = f"{manifests.JOBS_DIR}/{kind.value}.py"
        assert targets.get(path) == "docker/job.py", f"{path} missing from the image"
        assert importlib.util.find_spec(f"txntable.jobs.{kind.value}") is not None
    for src in targets.values():
        assert (REPO / src).is_file(), src
    # spark-submit: SPARK_HOME=/opt/spark is PySpark's distribution, which ships bin/spark-submit
    assert manifests.SPARK_SUBMIT == "/opt/spark/bin/spark-submit"
    env = " ".join(stage.args("ENV"))
    assert "SPARK_HOME=/opt/spark" in env and "JAVA_HOME=/opt/java" in env
    runs = " ".join(stage.args("RUN"))
    base = resolve(stage.base, dockerfile.global_args)
    py = re.match(r"python:(\d+\.\d+)\.", base)
    assert py, base
    assert f"ln -s /opt/venv/lib/python{py.group(1)}/site-packages/pyspark /opt/spark" in runs
    pyspark_dir = Path(importlib.util.find_spec("pyspark").origin or "").parent
    assert (pyspark_dir / "bin" / "spark-submit").is_file()
    assert any(j.name.startswith("spark-kubernetes_") for j in (pyspark_dir / "jars").iterdir())
    assert "openjdk-17-jre-headless" in runs
    # the Job backend's command is /bin/sh: a Debian base has it
    assert "slim-bookworm" in base
    entry = _exec_form(stage.args("ENTRYPOINT")[-1])
    assert entry[-1] == "/opt/entrypoint.sh" and entry[0] == "/usr/bin/tini" and "tini" in runs
    assert targets["/opt/entrypoint.sh"] == "docker/spark-entrypoint.sh"
    assert (REPO / "docker" / "spark-entrypoint.sh").stat().st_mode & 0o111


def test_dockerignore_keeps_only_build_inputs(dockerfile: Dockerfile) -> None:
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    sources = []
    for stage in dockerfile.stages.values():
        for copy in stage.args("COPY"):
            if not copy.startswith("--from="):
                sources += shlex.split(copy)[:-1]
    for src in sources:
        top = src.split("/")[0]
        assert top in allowed, f"{src} is excluded by .dockerignore"
        assert (REPO / src).exists(), src


def _stage_text(name: str) -> str:
    """The raw text of stage ``name`` (from its FROM line to the next one)."""
    text = DOCKERFILE.read_text()
    start = re.search(rf"^FROM \S+ AS {name}$", text, re.MULTILINE)
    assert start, name
    end = re.compile(r"^FROM ", re.MULTILINE).search(text, start.end())
    return text[start.end() : end.start() if end else len(text)]


def test_the_controller_images_environment_is_what_the_dockerfile_says(
    dockerfile: Dockerfile,
) -> None:
    """The control-plane tests start the controller with exactly this environment, working
    directory and command (tests/controlplane/controller.py, ``image_process``): the parser's
    reading is held here to the Dockerfile's own text, read another way (every ``NAME=`` word
    of the stage's ENV lines, and the values as written)."""
    base = {"PATH": "/base/bin"}
    image = dockerfile.environment("controller", base)
    raw = _stage_text("controller")
    env_lines = re.findall(r"^ENV (.*?)(?<!\\)$", raw, re.MULTILINE | re.DOTALL)
    written = dict(re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=(\S+)", " ".join(env_lines)))
    assert written, "the controller stage sets no ENV"
    assert set(image.env) == set(written) | set(base)
    for key, value in written.items():
        if "$" not in value and '"' not in value and "'" not in value:
            assert image.env[key] == value, key
    # the one substitution: the image's python first, then the base image's PATH
    assert image.env["PATH"] == "/opt/venv/bin:/base/bin"
    assert image.workdir == "/tmp" == image.env["HOME"]
    assert image.entrypoint == ["python", "-m", "txntable"]
    # the controller stage starts at the external base image, so nothing else comes in
    assert resolve(dockerfile.stages["controller"].base, dockerfile.global_args) not in (
        dockerfile.stages
    )


def test_env_is_read_as_docker_reads_it() -> None:
    parsed = parse(
        "FROM base:1.2.3 AS a\n"
        "ENV A=1\n"
        "ENV B=\"two words\" C='$A' D=$A E=${A}x F=${UNSET:-dflt} G=${A:+set} J=a\\ b\n"
        "ENV A=2 H=$A\n"  # within one instruction a variable has its value from before it
        "ENV I stays as written $A\n"  # the legacy form: one variable, the rest of the line
        "WORKDIR /srv\nWORKDIR app/../app\n"
        'ENTRYPOINT ["python", "-m", "x"]\n'
        'FROM a AS b\nENV PATH=/opt/bin:$PATH K="$UNSET"\n'
    )
    image = parsed.environment("b", {"PATH": "/usr/bin"})
    assert image.env == {
        "PATH": "/opt/bin:/usr/bin",
        "A": "2",
        "B": "two words",
        "C": "$A",
        "D": "1",
        "E": "1x",
        "F": "dflt",
        "G": "set",
        "J": "a b",
        "H": "1",
        "I": "stays as written 2",
        "K": "",
    }
    assert image.workdir == "/srv/app"
    assert image.entrypoint == ["python", "-m", "x"]
    assert parsed.environment("a").workdir == "/srv/app"
    assert parse("FROM x:1.0.0 AS s\n").environment("s") == Image({}, "/", [])
    assert words('a\\ b \'c d\' "e\\"f"', {}) == ["a b", "c d", 'e"f']
    for bad in ("A=${B:?x}", "A='open", 'A="open', "A=${open", "=x"):
        with pytest.raises(ValueError):
            parse(f"FROM x:1.0.0 AS s\nENV {bad}\n").environment("s")


def test_parser_reads_continuations_and_comments() -> None:
    parsed = parse("ARG A=1\nFROM x:1.2.3 AS s\n# c\nRUN a \\\n  # inner\n  && b\nUSER 5\n")
    assert parsed.global_args == {"A": "1"}
    assert parsed.stages["s"].instructions == [("RUN", "a    && b"), ("USER", "5")]
