"""VGG backbone shape and receptive-field geometry (checked against gradients of one output column)."""

import torch

from espnet_ext.nets.sharp.backbone import VGGBackbone, receptive_fields, width_layers


def test_100x32_gives_24_columns_of_512():
    out = VGGBackbone().eval()(torch.zeros(1, 1, 32, 100))
    assert out.shape == (1, 24, 512)


def test_receptive_fields_match_the_gradient_support_of_each_column():
    torch.manual_seed(0)
    backbone = VGGBackbone(channels=(4, 4, 4, 4)).eval()
    fields = receptive_fields(width_layers(backbone), 24)
    # Positive weights and average pooling (max pooling routes gradients through one input only): the
    # gradient support of an output column is then exactly its receptive field.
    for i, layer in enumerate(backbone.layers):
        if isinstance(layer, torch.nn.Conv2d):
            torch.nn.init.constant_(layer.weight, 0.1)
        if isinstance(layer, torch.nn.ReLU):
            layer.inplace = False
        if isinstance(layer, torch.nn.MaxPool2d):
            backbone.layers[i] = torch.nn.AvgPool2d(layer.kernel_size, layer.stride, layer.padding)
    image = torch.ones(1, 1, 32, 100, requires_grad=True)
    features = backbone(image)
    assert (
        fields[1][0] - fields[0][0] == 4 and fields[0][1] - fields[0][0] == 46
    )  # stride 4, 46 px wide
    for column in (0, 5, 23):
        image.grad = None
        features[0, column].sum().backward(retain_graph=True)
        touched = torch.nonzero(image.grad[0, 0].abs().sum(0) > 0).flatten()
        x0, x1 = fields[column]
        assert touched.min().item() == max(0, int(x0)) and touched.max().item() == min(
            99, int(x1) - 1
        )
