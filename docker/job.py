"""Spark's main file of a run: ``/opt/txntable/jobs/<kind>.py`` runs ``txntable.jobs.<kind>``.

The Dockerfile copies this one file under each run kind's name (launch/manifests.py builds
``mainApplicationFile`` and the spark-submit Job from that path), so the programs themselves
stay importable modules of the installed package.
"""

import runpy
from pathlib import Path

runpy.run_module(f"txntable.jobs.{Path(__file__).stem}", run_name="__main__", alter_sys=True)
