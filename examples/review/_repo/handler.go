package web

import (
	"fmt"
	"net/http"
	"os/exec"
)

// Ping runs ping against the host given in the query string.
func Ping(w http.ResponseWriter, r *http.Request) {
	host := r.URL.Query().Get("host")
	// Command injection: host goes to a shell unchecked.
	out, err := exec.Command("sh", "-c", "ping -c 1 "+host).CombinedOutput()
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	fmt.Fprintf(w, "%s", out)
}
