#!/bin/bash
#COLO --gpus=2 --mem=8GiB
#COLO --share=mps --threads=50 --name=bert
# a comment
#COLO --smact=0.35
python train.py
#COLO --gpus=4
