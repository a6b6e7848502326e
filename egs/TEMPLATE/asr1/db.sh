# Where the real corpora live. Leave a variable empty to run the recipe on its embedded mini corpus.
# Environment variables of the same name take precedence, e.g. LIBRISPEECH=/data/LibriSpeech ./run.sh
# A recipe with --download true fills an empty or missing directory from the corpus' official mirror.
LIBRISPEECH=${LIBRISPEECH:-}     # contains LibriSpeech/{train-clean-100,dev-clean,...} (OpenSLR SLR12)
LIBRISPEECH_LM=${LIBRISPEECH_LM:-}  # librispeech-lm-norm.txt.gz (OpenSLR SLR11)
LRS3=${LRS3:-}
MUSTC=${MUSTC:-}                 # contains en-de/data/{train,dev,tst-COMMON,tst-HE} or MUSTC_v1.0_en-de.tar.gz (MuST-C v1)
MTEDX=${MTEDX:-}
IWSLT14=${IWSLT14:-}     # contains de-en/ (the extracted de-en.tgz of IWSLT 2014; --download true fetches it)
IWSLT14_LM=${IWSLT14_LM:-}  # extended English LM text, one sentence per line (the paper: MuST-C en-de train.en)
WMT=${WMT:-}
CIFAR100=${CIFAR100:-}
MNIST=${MNIST:-}                 # MNIST idx files (train-images-idx3-ubyte[.gz], t10k-...)
SCENE_TEXT=${SCENE_TEXT:-}       # deep-text-recognition-benchmark LMDBs: training/{MJ,ST}, evaluation/{IIIT5k_3000,...}
EUROPARL_ST=${EUROPARL_ST:-}
