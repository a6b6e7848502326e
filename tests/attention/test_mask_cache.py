"""PerMask: values derived from a padding mask, once per mask tensor and key."""

import threading

import torch

from espnet_ext.attention.mask_cache import PerMask


def counting():
    calls = []

    def compute(value):
        def run():
            calls.append(value)
            return value

        return run

    return calls, compute


def test_each_mask_and_key_is_computed_once_until_the_mask_changes():
    cache, (calls, compute) = PerMask(), counting()
    mask = torch.ones(2, 1, 5, dtype=torch.bool)
    assert cache.get(mask, "a", compute(1)) == 1
    assert cache.get(mask, "a", compute(2)) == 1  # the next layer, the same tensor
    assert cache.get(mask, "b", compute(3)) == 3
    assert (
        cache.get(mask.clone(), "a", compute(4)) == 4
    )  # the next batch: equal content, another tensor
    mask[0, 0, 4] = False  # changed in place
    assert cache.get(mask, "a", compute(5)) == 5
    assert cache.get(None, "a", compute(6)) == 6 and cache.get(None, "a", compute(7)) == 7
    with torch.inference_mode():  # no version counter: never cached
        made = torch.ones(2, 1, 5, dtype=torch.bool)
        assert cache.get(made, "a", compute(8)) == 8 and cache.get(made, "a", compute(9)) == 9
    assert calls == [1, 3, 4, 5, 6, 7, 8, 9]


def test_the_masks_last_seen_are_kept_and_the_oldest_dropped():
    cache, (calls, compute) = PerMask(size=2), counting()
    self_mask, memory_mask, other = (torch.ones(1, 1, n, dtype=torch.bool) for n in (3, 4, 5))
    for _ in range(3):  # a decoder's layers alternate two masks: both stay cached
        cache.get(self_mask, "k", compute("self"))
        cache.get(memory_mask, "k", compute("memory"))
    assert calls == ["self", "memory"]
    cache.get(other, "k", compute("other"))  # a third evicts the least recent (self_mask)
    cache.get(memory_mask, "k", compute("memory again"))
    cache.get(self_mask, "k", compute("self again"))
    assert calls == ["self", "memory", "other", "self again"]


def test_threads_keep_their_own_values():
    cache = PerMask()
    mask = torch.ones(1, 1, 3, dtype=torch.bool)
    cache.get(mask, "k", lambda: "main")
    seen = []
    thread = threading.Thread(target=lambda: seen.append(cache.get(mask, "k", lambda: "thread")))
    thread.start()
    thread.join()
    assert seen == ["thread"] and cache.get(mask, "k", lambda: "other") == "main"
