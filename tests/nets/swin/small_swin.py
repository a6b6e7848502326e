"""A Swin small enough for unit tests and smoke runs, shared by them: 32 x 32 images in patches of 2
(16 x 16 tokens), windows of 4, Swin-T's four stages of two blocks with its patch merging between them."""

SMALL_SWIN = dict(
    img_size=32,
    patch_size=2,
    embed_dim=24,
    depths=(2, 2, 2, 2),
    num_heads=(1, 2, 2, 4),
    window_size=4,
)
