package kubernetes_test

import (
	"context"
	"os"
	"regexp"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/aml-go/aml/internal/kubetest"
)

func tokenRequest() *authv1.TokenRequest {
	hour := int64(3600)
	return &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &hour}}
}

// writeKubeconfig writes a kubeconfig of one cluster and a bearer token.
func writeKubeconfig(t *testing.T, path, server string, ca []byte, token, ns string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: ns}
	cfg.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// docsRole is the minimal Role of docs/sandboxes.md: the YAML block that
// follows the line "<!-- minimal-role -->".
func docsRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/sandboxes.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- minimal-role -->\\s*```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/sandboxes.md has no minimal Role (a yaml block after <!-- minimal-role -->)")
	}
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict(m[1], &role); err != nil {
		t.Fatalf("the docs' minimal Role: %v", err)
	}
	return &role
}

// grantMinimalRole makes the docs' minimal Role in ns and binds it to the
// service account.
func grantMinimalRole(t *testing.T, c *kubetest.Cluster, ns, account string) {
	t.Helper()
	ctx := context.Background()
	role := docsRole(t)
	role.Namespace = ns
	if _, err := c.Core.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}},
	}
	if _, err := c.Core.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
