package e2e

import "github.com/nats-operator/nats-operator/test/framework"

// The namespaces the package's shared controller watches: one per test that
// runs on it (framework.Shared). A test with a controller of its own
// (framework.OwnController) or a stack of its own (framework.StartStack)
// uses a namespace not listed here.
var (
	nsNewTLS         = framework.SharedNamespace("new-tls")
	nsScaleUp        = framework.SharedNamespace("scale-up")
	nsDeletion       = framework.SharedNamespace("deletion")
	nsReplace        = framework.SharedNamespace("replace")
	nsAuthRefs       = framework.SharedNamespace("auth-refs")
	nsScaleDown      = framework.SharedNamespace("scale-down")
	nsRollout        = framework.SharedNamespace("rollout")
	nsStorageGrow    = framework.SharedNamespace("storage-grow")
	nsStorageReplace = framework.SharedNamespace("storage-replace")
	nsAddAuth        = framework.SharedNamespace("add-auth")
	nsReload         = framework.SharedNamespace("reload")
	nsRotate         = framework.SharedNamespace("rotate")
	nsCertManager    = framework.SharedNamespace("cert-manager")
	nsRouteTLS       = framework.SharedNamespace("route-tls")
	nsQuickstart     = framework.SharedNamespace("quickstart")
	nsRefused        = framework.SharedNamespace("refused")
	nsPlugin         = framework.SharedNamespace("plugin")
	nsEphemeral      = framework.SharedNamespace("ephemeral")
	nsPause          = framework.SharedNamespace("pause")
	nsQuorum         = framework.SharedNamespace("quorum")
	nsQuorumPair     = framework.SharedNamespace("quorum-pair")
	nsDeletionSilent = framework.SharedNamespace("deletion-silent")
	nsOperatorReload = framework.SharedNamespace("operator-reload")
	nsVerifyClients  = framework.SharedNamespace("verify-clients")
)
