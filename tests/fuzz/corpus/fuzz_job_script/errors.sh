#!python3
#COLO --gpus=zero --memory=8GiB --name=a[31m --smact=2
