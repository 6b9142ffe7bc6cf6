python src/submit.py --task workloads/mobilenet3.rad
python src/submit.py --task workloads/densenet3.rad
python src/submit.py --task workloads/mobilenet.rad
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 5
python src/submit.py --task workloads/mobilenet3.rad
python src/submit.py --task workloads/densenet3.rad
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 1000
python src/submit.py --task workloads/BERT_large.rad
sleep 10
python src/submit.py --task workloads/BERT_base.rad
sleep 30
python src/submit.py --task workloads/xlnet_base_cased.rad
sleep 20
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 51
python src/submit.py --task workloads/densenet3.rad
sleep 365
python src/submit.py --task workloads/BERT_large.rad
sleep 18
python src/submit.py --task workloads/vgg.rad
sleep 166
python src/submit.py --task workloads/BERT_base.rad
sleep 439
python src/submit.py --task workloads/BERT_large.rad
sleep 83
python src/submit.py --task workloads/mobilenet3.rad
sleep 23
python src/submit.py --task workloads/resnet3.rad
sleep 56
python src/submit.py --task workloads/resnet.rad
sleep 260
python src/submit.py --task workloads/resnet2.rad
sleep 26
python src/submit.py --task workloads/resnet3.rad
sleep 313
python src/submit.py --task workloads/vgg.rad
sleep 17
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 301
python src/submit.py --task workloads/densenet.rad
sleep 187
python src/submit.py --task workloads/xlnet_base_cased.rad
sleep 8
python src/submit.py --task workloads/resnet3.rad
sleep 56
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 31
python src/submit.py --task workloads/mobilenet2.rad
sleep 52
python src/submit.py --task workloads/resnet.rad
sleep 84
python src/submit.py --task workloads/resnet2.rad
sleep 465
python src/submit.py --task workloads/mnist_train.rad
sleep 199
python src/submit.py --task workloads/BERT_base.rad
sleep 272
python src/submit.py --task workloads/BERT_large.rad
sleep 125
python src/submit.py --task workloads/densenet.rad
sleep 4
python src/submit.py --task workloads/Xception3.rad
sleep 286
python src/submit.py --task workloads/mnist_train.rad
sleep 283
python src/submit.py --task workloads/mobilenet3.rad
sleep 30
python src/submit.py --task workloads/densenet3.rad
sleep 63
python src/submit.py --task workloads/Xception3.rad
sleep 341
python src/submit.py --task workloads/mnist_train.rad
sleep 196
python src/submit.py --task workloads/Xception.rad
sleep 88
python src/submit.py --task workloads/vgg3.rad
sleep 9
python src/submit.py --task workloads/densenet.rad
sleep 4
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 2
python src/submit.py --task workloads/Xception3.rad
sleep 2
python src/submit.py --task workloads/mobilenet2.rad
sleep 3
python src/submit.py --task workloads/densenet3.rad
sleep 108
python src/submit.py --task workloads/xlnet_base_cased.rad
sleep 232
python src/submit.py --task workloads/Xception3.rad
sleep 152
python src/submit.py --task workloads/Xception.rad
sleep 249
python src/submit.py --task workloads/densenet.rad
sleep 52
python src/submit.py --task workloads/densenet2.rad
sleep 300
python src/submit.py --task workloads/gpt2_xl.rad
sleep 419
python src/submit.py --task workloads/densenet2.rad
sleep 181
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 49
python src/submit.py --task workloads/densenet.rad
sleep 1
python src/submit.py --task workloads/densenet2.rad
sleep 272
python src/submit.py --task workloads/densenet3.rad
sleep 247
python src/submit.py --task workloads/mnist_train.rad
sleep 30
python src/submit.py --task workloads/gpt2_xl.rad
sleep 221
python src/submit.py --task workloads/Xception3.rad
sleep 19
python src/submit.py --task workloads/xlnet_base_cased.rad
sleep 100
python src/submit.py --task workloads/Xception.rad
sleep 256
python src/submit.py --task workloads/BERT_base.rad
sleep 4
python src/submit.py --task workloads/vgg2.rad
sleep 589
python src/submit.py --task workloads/BERT_large.rad
sleep 11
python src/submit.py --task workloads/vgg2.rad
sleep 95
python src/submit.py --task workloads/gpt2_large.rad
sleep 370
python src/submit.py --task workloads/xlnet_base_cased.rad
sleep 91
python src/submit.py --task workloads/resnet.rad
sleep 45
python src/submit.py --task workloads/densenet.rad
sleep 197
python src/submit.py --task workloads/mobilenet3.rad
sleep 147
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 257
python src/submit.py --task workloads/BERT_base.rad
sleep 0
python src/submit.py --task workloads/mobilenet.rad
sleep 175
python src/submit.py --task workloads/vgg.rad
sleep 208
python src/submit.py --task workloads/densenet.rad
sleep 191
python src/submit.py --task workloads/Xception.rad
sleep 24
python src/submit.py --task workloads/resnet.rad
sleep 94
python src/submit.py --task workloads/resnet2.rad
sleep 126
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 74
python src/submit.py --task workloads/densenet3.rad
sleep 5
python src/submit.py --task workloads/Xception.rad
sleep 7
python src/submit.py --task workloads/vgg3.rad
sleep 294
python src/submit.py --task workloads/mobilenet3.rad
sleep 394
python src/submit.py --task workloads/Xception3.rad
sleep 123
python src/submit.py --task workloads/densenet3.rad
sleep 83
python src/submit.py --task workloads/densenet2.rad
sleep 30
python src/submit.py --task workloads/vgg2.rad
sleep 36
python src/submit.py --task workloads/gpt2_xl.rad
sleep 228
python src/submit.py --task workloads/vgg.rad
sleep 80
python src/submit.py --task workloads/BERT_base.rad
sleep 65
python src/submit.py --task workloads/gpt2_large.rad
sleep 2
python src/submit.py --task workloads/mobilenet2.rad
sleep 4
python src/submit.py --task workloads/Xception3.rad
sleep 60
python src/submit.py --task workloads/Xception2.rad
sleep 43
python src/submit.py --task workloads/densenet2.rad
sleep 52
python src/submit.py --task workloads/BERT_base.rad
sleep 27
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 122
python src/submit.py --task workloads/Xception3.rad
sleep 3
python src/submit.py --task workloads/mnist_train.rad
sleep 384
python src/submit.py --task workloads/BERT_base.rad
sleep 65
python src/submit.py --task workloads/mnist_train.rad
sleep 73
python src/submit.py --task workloads/densenet3.rad
sleep 62
python src/submit.py --task workloads/vgg2.rad
sleep 115
python src/submit.py --task workloads/xlnet_large_cased.rad
sleep 32
python src/submit.py --task workloads/xlnet_base_cased.rad