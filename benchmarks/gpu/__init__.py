"""The GPU check kit (issue 21): ``prepare.sh`` here, ``run.sh`` on a lent GPU machine.

``carry_*`` modules build the folder to carry; ``kit.py`` runs the steps (stdlib only, so it
starts before the carried wheels are installed); ``step_*`` modules are the steps, each run as
a child process that prints one JSON object.
"""
