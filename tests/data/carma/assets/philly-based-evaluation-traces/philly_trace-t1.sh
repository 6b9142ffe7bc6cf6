sleep 0
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/Xception.rad
sleep 181
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet18_cifar100_50e_3.rad
sleep 33
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet18_cifar100_20e_1.rad
sleep 0
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/vgg.rad
sleep 29
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_20e_3.rad
sleep 28
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet18_cifar100_20e_2.rad
sleep 151
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/BERT_base.rad
sleep 124
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/maskrcnn.rad
sleep 1
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/xlnet_large_cased_2.rad
sleep 19
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mobilenet_cifar100_50e_2.rad
sleep 46
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mobilenet_cifar100_20e_2.rad
sleep 55
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/BERT_large.rad
sleep 94
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/efficientNet2.rad
sleep 58
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_20e_3.rad
sleep 347
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_20e_3.rad
sleep 353
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mobilenet_cifar100_50e_3.rad
sleep 28
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet18_cifar100_50e_2.rad
sleep 219
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/Inception.rad
sleep 576
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/xlnet_base_cased_2.rad
sleep 25
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/vgg3.rad
sleep 599
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mobilenet_cifar100_20e_3.rad
sleep 600
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mobilenet_cifar100_20e_3.rad
sleep 118
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet18_cifar100_50e_1.rad
sleep 482
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/gpt2_large_2.rad
sleep 253
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mobilenet3.rad
sleep 347
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet2.rad
sleep 378
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mobilenet_cifar100_20e_3.rad
sleep 35
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mobilenet3.rad
sleep 187
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/efficientNet_cifar100_50e_2.rad
sleep 202
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet2.rad
sleep 399
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/UNet.rad
sleep 225
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mobilenet_cifar100_20e_2.rad
sleep 376
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet3.rad
sleep 599
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_50e_3.rad
sleep 599
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/efficientNet_cifar100_20e_3.rad
sleep 487
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet18_cifar100_20e_3.rad
sleep 113
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/Xception3.rad
sleep 289
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_20e_2.rad
sleep 271
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_50e_3.rad
sleep 40
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet3.rad
sleep 410
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_50e_2.rad
sleep 190
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet3.rad
sleep 600
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_20e_3.rad
sleep 486
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/Inception.rad
sleep 94
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/dlrm.rad
sleep 20
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_20e_1.rad
sleep 29
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_20e_2.rad
sleep 571
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_50e_2.rad
sleep 98
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet.rad
sleep 99
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet.rad
sleep 128
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/Inception3.rad
sleep 275
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_20e_2.rad
sleep 107
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/efficientNet_cifar100_20e_1.rad
sleep 493
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/Inception3.rad
sleep 416
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet18_cifar100_20e_1.rad
sleep 184
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_20e_1.rad
sleep 439
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/vgg2.rad
sleep 83
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/mobilenet3.rad
sleep 23
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/resnet34_cifar100_20e_1.rad
sleep 56
python /home/ehyo/rad-scheduler/src/submit.py --task /home/ehyo/rad-scheduler/workloads/efficientNet_cifar100_20e_3.rad