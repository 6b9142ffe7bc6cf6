#! /bin/sh -e 
#COLO --name=résumé-训练 --mem=0.5
