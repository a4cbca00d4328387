"""Release manifests the setup applies: a download that fails names the URL, its mirror and the setting."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kai_scale.cluster.manifests import SetupError, apply_release
from kai_scale.cluster.placement import Placement
from kai_scale.cluster.sources import Sources
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.release_manifests import ReleaseManifestsHook

KWOK = "https://github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/kwok.yaml"


def test_a_mirror_that_lacks_the_manifest_is_named_with_its_upstream(tmp_path: Path) -> None:
    """The cluster is never reached: the hook connects lazily, and the download fails first."""
    mirror = tmp_path.as_uri() + "/github.com/"
    sources = Sources.parse(json.dumps([{"upstream": "https://github.com/", "mirror": mirror}]))
    mirrored = mirror + "kubernetes-sigs/kwok/releases/download/v0.8.0/kwok.yaml"
    expected = (
        rf"^cannot download {re.escape(mirrored)} \(the mirror of {re.escape(KWOK)}\): .*No such file.*; "
        r"the worker needs to reach it to install it \(or a mirror of it: KAI_SCALE_SOURCE_MIRRORS\)$"
    )
    with pytest.raises(SetupError, match=expected):
        apply_release(
            ClusterHook(conn_id="never_reached"),
            [KWOK],
            releases=ReleaseManifestsHook(),
            sources=sources,
            placement=Placement(),
        )
