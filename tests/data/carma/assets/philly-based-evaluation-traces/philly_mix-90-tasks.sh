python src/submit.py --task workloads/gpt2_large_2.rad
sleep 73
python src/submit.py --task workloads/efficientNet3.rad
sleep 441
python src/submit.py --task workloads/resnet18_cifar100_20e_3.rad
sleep 52
python src/submit.py --task workloads/resnet18_cifar100_50e_1.rad
sleep 51
python src/submit.py --task workloads/resnet34_cifar100_20e_2.rad
sleep 365
python src/submit.py --task workloads/resnet34_cifar100_20e_1.rad
sleep 18
python src/submit.py --task workloads/resnet.rad
sleep 166
python src/submit.py --task workloads/resnet18_cifar100_20e_3.rad
sleep 439
python src/submit.py --task workloads/resnet18_cifar100_20e_1.rad
sleep 83
python src/submit.py --task workloads/efficientNet2.rad
sleep 23
python src/submit.py --task workloads/resnet18_cifar100_20e_1.rad
sleep 56
python src/submit.py --task workloads/resnet34_cifar100_20e_1.rad
sleep 260
python src/submit.py --task workloads/mobilenet_cifar100_20e_2.rad
sleep 26
python src/submit.py --task workloads/resnet18_cifar100_50e_3.rad
sleep 313
python src/submit.py --task workloads/vgg.rad
sleep 17
python src/submit.py --task workloads/xlnet_base_cased_2.rad
sleep 301
python src/submit.py --task workloads/vgg2.rad
sleep 187
python src/submit.py --task workloads/resnet18_cifar100_20e_2.rad
sleep 8
python src/submit.py --task workloads/resnet34_cifar100_20e_1.rad
sleep 56
python src/submit.py --task workloads/resnet18_cifar100_20e_1.rad
sleep 31
python src/submit.py --task workloads/resnet34_cifar100_20e_1.rad
sleep 52
python src/submit.py --task workloads/resnet18_cifar100_50e_2.rad
sleep 84
python src/submit.py --task workloads/Inception2.rad
sleep 465
python src/submit.py --task workloads/efficientNet_cifar100_50e_2.rad
sleep 199
python src/submit.py --task workloads/Xception.rad
sleep 272
python src/submit.py --task workloads/resnet18_cifar100_50e_3.rad
sleep 125
python src/submit.py --task workloads/resnet3.rad
sleep 4
python src/submit.py --task workloads/resnet18_cifar100_20e_1.rad
sleep 286
python src/submit.py --task workloads/mobilenet_cifar100_50e_3.rad
sleep 283
python src/submit.py --task workloads/mobilenet_cifar100_50e_1.rad
sleep 30
python src/submit.py --task workloads/efficientNet_cifar100_50e_2.rad
sleep 63
python src/submit.py --task workloads/efficientNet_cifar100_20e_2.rad
sleep 341
python src/submit.py --task workloads/vgg2.rad
sleep 196
python src/submit.py --task workloads/mobilenet_cifar100_20e_2.rad
sleep 88
python src/submit.py --task workloads/resnet34_cifar100_20e_2.rad
sleep 9
python src/submit.py --task workloads/resnet18_cifar100_20e_3.rad
sleep 4
python src/submit.py --task workloads/xlnet_large_cased_2.rad
sleep 2
python src/submit.py --task workloads/resnet34_cifar100_20e_2.rad
sleep 2
python src/submit.py --task workloads/resnet34_cifar100_20e_3.rad
sleep 3
python src/submit.py --task workloads/mobilenet_cifar100_50e_3.rad
sleep 108
python src/submit.py --task workloads/resnet18_cifar100_50e_3.rad
sleep 232
python src/submit.py --task workloads/Inception2.rad
sleep 152
python src/submit.py --task workloads/efficientNet_cifar100_20e_2.rad
sleep 249
python src/submit.py --task workloads/mobilenet_cifar100_50e_1.rad
sleep 52
python src/submit.py --task workloads/efficientNet_cifar100_20e_2.rad
sleep 300
python src/submit.py --task workloads/Inception2.rad
sleep 419
python src/submit.py --task workloads/mobilenet_cifar100_20e_3.rad
sleep 181
python src/submit.py --task workloads/resnet18_cifar100_20e_2.rad
sleep 49
python src/submit.py --task workloads/Inception.rad
sleep 1
python src/submit.py --task workloads/BERT_base.rad
sleep 272
python src/submit.py --task workloads/resnet18_cifar100_50e_3.rad
sleep 247
python src/submit.py --task workloads/efficientNet.rad
sleep 30
python src/submit.py --task workloads/resnet34_cifar100_20e_1.rad
sleep 221
python src/submit.py --task workloads/resnet18_cifar100_50e_2.rad
sleep 19
python src/submit.py --task workloads/vgg.rad
sleep 100
python src/submit.py --task workloads/mnist_train.rad
sleep 256
python src/submit.py --task workloads/efficientNet_cifar100_50e_1.rad
sleep 4
python src/submit.py --task workloads/resnet3.rad
sleep 589
python src/submit.py --task workloads/xlnet_large_cased_2.rad
sleep 11
python src/submit.py --task workloads/resnet34_cifar100_20e_3.rad
sleep 95
python src/submit.py --task workloads/resnet18_cifar100_50e_1.rad
sleep 370
python src/submit.py --task workloads/mobilenet_cifar100_50e_1.rad
sleep 91
python src/submit.py --task workloads/resnet18_cifar100_20e_2.rad
sleep 45
python src/submit.py --task workloads/mobilenet_cifar100_20e_1.rad
sleep 197
python src/submit.py --task workloads/mobilenet_cifar100_20e_3.rad
sleep 147
python src/submit.py --task workloads/Inception2.rad
sleep 257
python src/submit.py --task workloads/resnet18_cifar100_20e_3.rad
sleep 0
python src/submit.py --task workloads/mobilenet_cifar100_20e_1.rad
sleep 175
python src/submit.py --task workloads/Xception.rad
sleep 208
python src/submit.py --task workloads/resnet18_cifar100_20e_3.rad
sleep 191
python src/submit.py --task workloads/mobilenet_cifar100_20e_2.rad
sleep 24
python src/submit.py --task workloads/Xception.rad
sleep 94
python src/submit.py --task workloads/gpt2_large_2.rad
sleep 126
python src/submit.py --task workloads/mobilenet_cifar100_20e_2.rad
sleep 74
python src/submit.py --task workloads/resnet34_cifar100_50e_2.rad
sleep 5
python src/submit.py --task workloads/mobilenet_cifar100_20e_1.rad
sleep 7
python src/submit.py --task workloads/resnet34_cifar100_20e_1.rad
sleep 294
python src/submit.py --task workloads/resnet18_cifar100_20e_2.rad
sleep 394
python src/submit.py --task workloads/BERT_large.rad
sleep 123
python src/submit.py --task workloads/Xception.rad
sleep 83
python src/submit.py --task workloads/resnet18_cifar100_50e_3.rad
sleep 30
python src/submit.py --task workloads/resnet2.rad
sleep 36
python src/submit.py --task workloads/Xception.rad
sleep 228
python src/submit.py --task workloads/xlnet_base_cased_2.rad
sleep 80
python src/submit.py --task workloads/Xception3.rad
sleep 65
python src/submit.py --task workloads/mobilenet_cifar100_50e_3.rad
sleep 2
python src/submit.py --task workloads/Xception2.rad
sleep 4
python src/submit.py --task workloads/efficientNet.rad
sleep 60
python src/submit.py --task workloads/vgg.rad
sleep 43
python src/submit.py --task workloads/vgg2.rad