#!/bin/bash
#SBATCH --job-name=probe
#SBATCH --time=1
#SBATCH --output=/tmp/sk/probe-%j.out
echo hello; echo err >&2
