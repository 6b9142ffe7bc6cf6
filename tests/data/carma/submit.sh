#!/bin/bash
cd experiments
python3 submit.py --task resnet50_64.rad
sleep 73
python3 submit.py --task gpt2_xl.rad
sleep 10
