package postgres

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

// Roles of the TLS cluster: certRole signs in with a client certificate,
// pwRole with a SCRAM password; both only over TLS.
const (
	certRole = "pgcdc_cert"
	pwRole   = "pgcdc_pw"
)

// tlsFiles are the PEM files of a test PKI: a CA, a server certificate for
// 127.0.0.1 and localhost, and a client certificate for certRole, all
// signed by the CA.
type tlsFiles struct {
	caCert, serverCert, serverKey, clientCert, clientKey []byte
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	caKey := newKey(t)
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "pg-cdc test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (certOut, keyOut []byte) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
			DNSNames:     dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return pemBlock("CERTIFICATE", der), keyPEM(t, key)
	}
	var f tlsFiles
	f.caCert = pemBlock("CERTIFICATE", caDER)
	f.serverCert, f.serverKey = leaf(2, "localhost", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	// cert authentication maps the certificate's CN to the role name.
	f.clientCert, f.clientKey = leaf(3, certRole, x509.ExtKeyUsageClientAuth, nil, nil)
	return f
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keyPEM(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("PRIVATE KEY", der)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeFile writes a client-side file with mode 0600, as libpq wants of a
// key (pgx does not check, a real deployment should).
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsCluster is a cluster that takes TLS connections, with certRole and
// pwRole allowed to sign in only over TLS, and a database of its own.
type tlsCluster struct {
	cluster *pgtest.Cluster
	files   tlsFiles
	dir     string // client-side files: ca.crt, client.crt, client.key
	dbName  string
}

func newTLSCluster(t *testing.T) *tlsCluster {
	t.Helper()
	files := newTLSFiles(t)
	c := pgtest.NewWith(t, pgtest.Options{
		// Written into the data directory, 0600 and owned by the server's
		// OS user, which PostgreSQL requires of the key.
		Files: map[string][]byte{
			"server.crt": files.serverCert,
			"server.key": files.serverKey,
			"root.crt":   files.caCert,
		},
		Settings: []string{
			"ssl = on",
			"ssl_cert_file = 'server.crt'",
			"ssl_key_file = 'server.key'",
			"ssl_ca_file = 'root.crt'",
		},
		// A logical replication connection matches a database name ("all"),
		// not the "replication" keyword. The reject lines keep the roles off
		// plain TCP, which pgtest's own lines would trust.
		HBA: []string{
			"hostssl all " + certRole + " 127.0.0.1/32 cert",
			"host    all " + certRole + " 127.0.0.1/32 reject",
			"hostssl all " + pwRole + " 127.0.0.1/32 scram-sha-256",
			"host    all " + pwRole + " 127.0.0.1/32 reject",
		},
	})
	adminURL := c.CreateDatabase(t)
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tlsCluster{cluster: c, files: files, dir: t.TempDir(), dbName: strings.TrimPrefix(u.Path, "/")}
	writeFile(t, tc.dir, "ca.crt", files.caCert)
	writeFile(t, tc.dir, "client.crt", files.clientCert)
	writeFile(t, tc.dir, "client.key", files.clientKey)
	tc.admin(t,
		"CREATE ROLE "+certRole+" LOGIN REPLICATION",
		"CREATE ROLE "+pwRole+" LOGIN REPLICATION PASSWORD 'password-A'",
	)
	return tc
}

// admin runs statements as the superuser over pgtest's trusted socket.
func (tc *tlsCluster) admin(t *testing.T, sqls ...string) {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, tc.cluster.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// url is a URL for role on the cluster's database with the given query.
func (tc *tlsCluster) url(role, query string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?%s", role, tc.cluster.Port, tc.dbName, query)
}

// sslInUse reports pg_stat_ssl.ssl of a DB's connection.
func sslInUse(t *testing.T, db *DB) bool {
	t.Helper()
	var ssl bool
	ctx := testCtx(t)
	if err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl)
	}); err != nil {
		t.Fatal(err)
	}
	return ssl
}

// replSSLInUse reports pg_stat_ssl.ssl of a replication connection: a
// replication=database session runs plain SQL too.
func replSSLInUse(t *testing.T, r *ReplConn) bool {
	t.Helper()
	res, err := r.conn.Exec(testCtx(t), `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 {
		t.Fatalf("pg_stat_ssl: %d results", len(res))
	}
	return string(res[0].Rows[0][0]) == "t"
}

func closeRepl(t *testing.T, r *ReplConn) {
	t.Helper()
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("close replication connection: %v", err)
	}
}

// TestTLSClientCertificate signs in with a client certificate, the TLS
// parameters of the URL reaching both kinds of connection, and checks what
// happens without the certificate or the CA.
func TestTLSClientCertificate(t *testing.T) {
	tc := newTLSCluster(t)
	ctx := testCtx(t)
	q := url.Values{
		"sslmode":     {"verify-full"},
		"sslrootcert": {filepath.Join(tc.dir, "ca.crt")},
		"sslcert":     {filepath.Join(tc.dir, "client.crt")},
		"sslkey":      {filepath.Join(tc.dir, "client.key")},
	}
	spec := StaticURL(tc.url(certRole, q.Encode()))

	db, err := Connect(ctx, spec)
	if err != nil {
		t.Fatalf("connect with a client certificate: %v", err)
	}
	defer db.Close()
	if !sslInUse(t, db) {
		t.Fatal("DB connection: pg_stat_ssl.ssl is false")
	}
	r, err := ConnectReplication(ctx, spec)
	if err != nil {
		t.Fatalf("replication connection with a client certificate: %v", err)
	}
	defer closeRepl(t, r)
	if !replSSLInUse(t, r) {
		t.Fatal("replication connection: pg_stat_ssl.ssl is false")
	}
	if _, _, err := r.IdentifySystem(ctx); err != nil {
		t.Fatal(err)
	}

	refused := []struct{ name, query string }{
		// hostssl … cert: TLS without a client certificate is refused.
		{"no client certificate", url.Values{"sslmode": {"verify-full"}, "sslrootcert": {filepath.Join(tc.dir, "ca.crt")}}.Encode()},
		// host … reject: so is plain TCP.
		{"no TLS", "sslmode=disable"},
	}
	for _, tc2 := range refused {
		_, err := Connect(ctx, StaticURL(tc.url(certRole, tc2.query)))
		if err == nil {
			t.Errorf("%s: DB connection accepted", tc2.name)
		}
		if IsTransient(err) {
			t.Errorf("%s: %v is transient", tc2.name, err)
		}
		r, err := ConnectReplication(ctx, StaticURL(tc.url(certRole, tc2.query)))
		if err == nil {
			closeRepl(t, r)
			t.Errorf("%s: replication connection accepted", tc2.name)
		}
	}

	// verify-full checks the server against the CA: another CA's
	// certificate is not trusted.
	other := newTLSFiles(t)
	q.Set("sslrootcert", writeFile(t, t.TempDir(), "other-ca.crt", other.caCert))
	_, err = Connect(ctx, StaticURL(tc.url(certRole, q.Encode())))
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") || IsTransient(err) {
		t.Errorf("server certificate from an unknown CA: %v (transient %t), want a terminal error", err, IsTransient(err))
	}
}

// TestPasswordSourcePerConnection: a ConnSpec's URL and password are asked
// for every physical connection, so a password changed on the server and at
// the source is used by the next connection of the same DB and the next
// replication connection, and the old one is refused. The password travels
// only over TLS (scram-sha-256 in hostssl), as an IAM token would.
func TestPasswordSourcePerConnection(t *testing.T) {
	tc := newTLSCluster(t)
	ctx := testCtx(t)
	var mu sync.Mutex
	password := "password-A"
	current := func() string { mu.Lock(); defer mu.Unlock(); return password }
	var urlCalls, pwCalls atomic.Int64
	q := url.Values{"sslmode": {"verify-full"}, "sslrootcert": {filepath.Join(tc.dir, "ca.crt")}}.Encode()
	spec := ConnSpec{
		URL: countingURL(tc.url(pwRole, q), &urlCalls),
		Password: func(_ context.Context, host string, port uint16, user string) (string, error) {
			pwCalls.Add(1)
			if host != "127.0.0.1" || int(port) != tc.cluster.Port || user != pwRole {
				return "", fmt.Errorf("asked for %s@%s:%d", user, host, port)
			}
			return current(), nil
		},
	}
	physical := func(want int64) {
		t.Helper()
		if urlCalls.Load() != want || pwCalls.Load() != want {
			t.Fatalf("URL asked %d times, password %d times; want %d physical connections", urlCalls.Load(), pwCalls.Load(), want)
		}
	}

	db, err := Connect(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	physical(1)
	r1, err := ConnectReplication(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRepl(t, r1)
	physical(2)

	// Rotate: the server and the source change the password.
	tc.admin(t, "ALTER ROLE "+pwRole+" PASSWORD 'password-B'")
	mu.Lock()
	password = "password-B"
	mu.Unlock()

	// Open sessions are unaffected; the idle one is reused, no new sign-in.
	if !sslInUse(t, db) {
		t.Fatal("pg_stat_ssl.ssl is false")
	}
	physical(2)
	// Holding the idle connection in a transaction makes the DB open a
	// second one, which signs in with the new password.
	snap, err := db.BeginSnapshot(ctx, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CurrentXID(ctx); err != nil {
		t.Fatalf("new DB connection after the rotation: %v", err)
	}
	snap.Close()
	physical(3)
	r2, err := ConnectReplication(ctx, spec)
	if err != nil {
		t.Fatalf("new replication connection after the rotation: %v", err)
	}
	closeRepl(t, r2)
	physical(4)

	// The old password no longer signs in, and no error shows it.
	mu.Lock()
	password = "password-A"
	mu.Unlock()
	db2, err := Connect(ctx, spec)
	if err == nil {
		db2.Close()
		t.Fatal("the old password still signs in: the test would not notice a stale one")
	}
	if strings.Contains(err.Error(), "password-A") {
		t.Fatalf("error shows the password: %v", err)
	}
	t.Logf("old password: %v", err)
	if IsTransient(err) {
		t.Errorf("a refused password is not transient: %v", err)
	}
	// The message leads with the server's answer, and the hint says what
	// to check.
	var pgErr *pgconn.PgError
	if !strings.HasPrefix(err.Error(), "connect to 127.0.0.1:") || !strings.Contains(err.Error(), "(user "+pwRole+"): FATAL: password authentication failed") ||
		!strings.HasSuffix(err.Error(), "(SQLSTATE 28P01)") || !errors.As(err, &pgErr) || !strings.Contains(cdc.HintOf(err), "PGPASSWORD") {
		t.Errorf("a refused password: %v (hint %q), want the server's answer first and a hint", err, cdc.HintOf(err))
	}
	r3, err := ConnectReplication(ctx, spec)
	if err == nil {
		closeRepl(t, r3)
		t.Fatal("replication: the old password still signs in")
	}
	if strings.Contains(err.Error(), "password-A") {
		t.Fatalf("replication error shows the password: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "open replication connection to 127.0.0.1:") || !strings.HasSuffix(err.Error(), "(SQLSTATE 28P01)") || cdc.HintOf(err) == "" {
		t.Errorf("a refused replication password: %v (hint %q)", err, cdc.HintOf(err))
	}
}

// TestTLSRequiredByTheURL: sslmode=require against a server without TLS
// (the shared cluster) fails, terminally, and sslmode=disable still works.
func TestTLSRequiredByTheURL(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	required := strings.Replace(e.url, "sslmode=disable", "sslmode=require", 1)
	_, err := Connect(ctx, StaticURL(required))
	if err == nil || !strings.Contains(err.Error(), "server refused TLS connection") || IsTransient(err) {
		t.Fatalf("sslmode=require without TLS on the server: %v (transient %t), want a terminal refusal", err, IsTransient(err))
	}
	if _, err := ConnectReplication(ctx, StaticURL(required)); err == nil || IsTransient(err) {
		t.Fatalf("replication, sslmode=require without TLS on the server: %v (transient %t)", err, IsTransient(err))
	}
	if sslInUse(t, e.db) {
		t.Fatal("sslmode=disable: pg_stat_ssl.ssl is true")
	}
}
