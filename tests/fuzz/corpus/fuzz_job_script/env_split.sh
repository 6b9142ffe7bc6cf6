#!/usr/bin/env -S python3 -u
  #COLO	--mem=1024TiB --threads=100
print(1)
