#!/bin/bash
#SBATCH -J train --gres=gpu:a100:2 -t 1:00:00
#SBATCH --partition=gpu -c 8 --mem=32G
#SBATCH -o out-%j.txt -e err.txt --array=0-3%2 -d afterok:1
#COLO --mem=8g
python train.py
