#!/bin/bash
#SBATCH --requeue
#SBATCH --signal=B:USR1@60
#COLO --name=ckpt
python train.py
