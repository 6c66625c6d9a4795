"""Documentation generated from the site config by the code that builds the jobs (`sk docs build`).

build.py assembles the pages; schema.py (job-spec reference), topology.py (the GPU/NUMA/CPU/HCA figure),
examples.py (scripts from the real renderer), why.py (binding and NCCL reasons), troubleshoot.py (real
messages from known-bad inputs) provide their content; html.py runs mkdocs and checks the result is offline.
"""
