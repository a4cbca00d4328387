"""ReleaseManifestsHook: the objects of a release manifest, or an error naming it and why not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kai_scale.hooks.release_manifests import ReleaseManifestError, ReleaseManifestsHook


def test_the_objects_of_a_manifest_on_the_workers_disk(tmp_path: Path) -> None:
    manifest = tmp_path / "kwok.yaml"
    # An empty document between two, as release manifests have: left out.
    manifest.write_text(
        "kind: Namespace\nmetadata: {name: kube-system}\n---\n---\nkind: Stage\nmetadata: {name: a}\n"
    )
    assert ReleaseManifestsHook().documents(manifest.as_uri()) == [
        {"kind": "Namespace", "metadata": {"name": "kube-system"}},
        {"kind": "Stage", "metadata": {"name": "a"}},
    ]


def test_a_manifest_that_cannot_be_read_is_named_with_the_reason(tmp_path: Path) -> None:
    missing = (tmp_path / "absent.yaml").as_uri()
    with pytest.raises(
        ReleaseManifestError, match=rf"^cannot download {re.escape(missing)}: .*No such file"
    ) as raised:
        ReleaseManifestsHook().documents(missing)
    assert raised.value.reference == missing
    assert str(raised.value) == f"cannot download {missing}: {raised.value.reason}"
