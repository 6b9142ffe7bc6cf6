python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mnist_train.rad
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mnist_train.rad
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mnist_train.rad
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mnist_train.rad
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mnist_train.rad