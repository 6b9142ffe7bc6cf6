python src/submit.py --task workloads/Inception3.rad
sleep 73
python src/submit.py --task workloads/xlnet_large_cased_2.rad
sleep 441
python src/submit.py --task workloads/mnist_train.rad
sleep 52
python src/submit.py --task workloads/vgg3.rad
sleep 51
python src/submit.py --task workloads/efficientNet2.rad
sleep 365
python src/submit.py --task workloads/Inception2.rad
sleep 18
python src/submit.py --task workloads/mobilenet3.rad
sleep 166
python src/submit.py --task workloads/BERT_large.rad
sleep 439
python src/submit.py --task workloads/Inception.rad
sleep 83
python src/submit.py --task workloads/BERT_base.rad
sleep 23
python src/submit.py --task workloads/resnet.rad
sleep 56
python src/submit.py --task workloads/mnist_train.rad
sleep 260
python src/submit.py --task workloads/vgg3.rad
sleep 26
python src/submit.py --task workloads/efficientNet.rad
sleep 313
python src/submit.py --task workloads/vgg2.rad
sleep 17
python src/submit.py --task workloads/mobilenet.rad
sleep 301
python src/submit.py --task workloads/vgg2.rad
sleep 187
python src/submit.py --task workloads/Xception3.rad
sleep 8
python src/submit.py --task workloads/Xception3.rad
sleep 56
python src/submit.py --task workloads/xlnet_base_cased_2.rad
sleep 31
python src/submit.py --task workloads/Inception3.rad
sleep 52
python src/submit.py --task workloads/mnist_train.rad
sleep 84
python src/submit.py --task workloads/resnet3.rad
sleep 465
python src/submit.py --task workloads/efficientNet.rad
sleep 199
python src/submit.py --task workloads/Inception.rad
sleep 272
python src/submit.py --task workloads/resnet2.rad
sleep 125
python src/submit.py --task workloads/BERT_base.rad
sleep 4
python src/submit.py --task workloads/mnist_train.rad
sleep 286
python src/submit.py --task workloads/Inception.rad
sleep 283
python src/submit.py --task workloads/vgg.rad
sleep 30
python src/submit.py --task workloads/Inception.rad
sleep 63
python src/submit.py --task workloads/mobilenet2.rad
sleep 341
python src/submit.py --task workloads/efficientNet.rad
sleep 196
python src/submit.py --task workloads/vgg2.rad
sleep 88
python src/submit.py --task workloads/resnet3.rad
sleep 9
python src/submit.py --task workloads/mobilenet.rad
sleep 4
python src/submit.py --task workloads/mnist_train.rad
sleep 2
python src/submit.py --task workloads/BERT_base.rad
sleep 2
python src/submit.py --task workloads/vgg2.rad
sleep 3
python src/submit.py --task workloads/mobilenet2.rad
sleep 108
python src/submit.py --task workloads/vgg.rad
sleep 232
python src/submit.py --task workloads/vgg.rad
sleep 152
python src/submit.py --task workloads/Inception2.rad
sleep 249
python src/submit.py --task workloads/BERT_base.rad
sleep 52
python src/submit.py --task workloads/efficientNet2.rad
sleep 300
python src/submit.py --task workloads/BERT_base.rad
sleep 419
python src/submit.py --task workloads/mnist_train.rad
sleep 181
python src/submit.py --task workloads/Xception3.rad
sleep 49
python src/submit.py --task workloads/efficientNet3.rad
sleep 1
python src/submit.py --task workloads/resnet3.rad
sleep 272
python src/submit.py --task workloads/efficientNet.rad
sleep 247
python src/submit.py --task workloads/resnet2.rad
sleep 30
python src/submit.py --task workloads/mobilenet.rad
sleep 221
python src/submit.py --task workloads/gpt2_large_2.rad
sleep 19
python src/submit.py --task workloads/mobilenet.rad
sleep 100
python src/submit.py --task workloads/resnet3.rad
sleep 256
python src/submit.py --task workloads/efficientNet.rad
sleep 4
python src/submit.py --task workloads/mobilenet2.rad
sleep 589
python src/submit.py --task workloads/efficientNet3.rad
sleep 11
python src/submit.py --task workloads/mnist_train.rad