"""Text processing for recipes (token lists: ``python -m espnet_ext.text.token_list``)."""
