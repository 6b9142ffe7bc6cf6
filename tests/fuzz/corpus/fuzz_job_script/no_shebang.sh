#COLOR not a directive
#COLO
python x.py
