#!/usr/bin/env python3
#COLO --gpus=1
#COLO --name="bert large" --share='exclusive'
import torch
