"""kwok-operator's NodePool, the custom resource of the simulated nodes: its CRD and its kind.

The pipeline's setup installs kwok-operator and sizes a pool; the local environment and the tests
read pools by the same names.
"""

NODEPOOL_CRD = "nodepools.kwok.sigs.run-ai.com"
NODEPOOL = ("kwok.sigs.run-ai.com/v1beta1", "NodePool")
"""Its API version and kind."""
