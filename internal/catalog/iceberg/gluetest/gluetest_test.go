package gluetest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestProtocol: an operation the fake lacks is answered as Glue answers
// an unknown one, naming it; a missing table is EntityNotFoundException;
// both are recorded.
func TestProtocol(t *testing.T) {
	s := New(t)
	call := func(op, body string) (int, map[string]string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.URL+"/", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Amz-Target", "AWSGlue."+op)
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out := map[string]string{}
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if code, out := call("GetPartitions", `{}`); code != 400 || out["__type"] != "UnknownOperationException" || !strings.Contains(out["message"], "AWSGlue.GetPartitions") {
		t.Errorf("unknown operation: %d %v", code, out)
	}
	if code, out := call("GetTable", `{"DatabaseName":"db","Name":"t"}`); code != 400 || out["__type"] != "EntityNotFoundException" {
		t.Errorf("missing table: %d %v", code, out)
	}
	if code, _ := call("CreateDatabase", `{"DatabaseInput":{"Name":"DB"}}`); code != 200 {
		t.Errorf("create database: %d", code)
	}
	if code, _ := call("CreateTable", `{"DatabaseName":"db","TableInput":{"Name":"T","TableType":"EXTERNAL_TABLE"}}`); code != 200 {
		t.Errorf("create table: %d", code)
	}
	if code, out := call("UpdateTable", `{"DatabaseName":"db","VersionId":"7","TableInput":{"Name":"t"}}`); code != 400 || out["__type"] != "ConcurrentModificationException" {
		t.Errorf("stale VersionId: %d %v", code, out)
	}
	if code, _ := call("UpdateTable", `{"DatabaseName":"db","VersionId":"1","TableInput":{"Name":"t"}}`); code != 200 || s.VersionID("db", "t") != "2" {
		t.Errorf("update: %d, version %s", code, s.VersionID("db", "t"))
	}
	if got := s.Requests("GetPartitions", "UpdateTable"); len(got) != 3 || got[0].Op != "GetPartitions" || got[2].Body["VersionId"] != "1" {
		t.Errorf("recorded: %+v", got)
	}
}
