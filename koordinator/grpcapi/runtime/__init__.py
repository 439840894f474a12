"""The container-runtime side contracts: the CRI (``v1``) and the runtime hook API (``v1alpha1``)."""
