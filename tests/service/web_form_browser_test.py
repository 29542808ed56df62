#!/usr/bin/python3
"""The web form in headless Chromium against a real `kiln serve`.

Opens /, sets an API token, uploads the Fashion-MNIST model (its input must be read from the
file), submits an invalid job name and then an invalid target (each 422 must show next to the
field it names), describes the target and the constraints, submits, waits for the progress bar
to reach 100% with every stage done, checks the report (chart, stages, artifacts), downloads
the compiled plan and compares it with the API's SHA-256, checks that every API call sent the
token as a bearer header and no URL held it, opens the report on its own page, shows the job
again from the form's #job= address, and saves a screenshot. Any JavaScript error or CSP
violation in the browser's console fails the test.

Usage: web_form_browser_test.py KILN EXAMPLES_DIR SCREENSHOT_DIR
Exit 77 (skipped) only when Chromium is not installed.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
TOKEN = "kiln_00000000000000aa_test-secret"

# Network errors the page is expected to cause: the target registry may not exist (404) or
# need a token (401), and the first submission is invalid on purpose (422).
EXPECTED_NETWORK_ERRORS = ("/v1/targets - Failed to load resource: the server responded with a status of 404",
                           "/v1/targets - Failed to load resource: the server responded with a status of 401",
                           "/v1/jobs - Failed to load resource: the server responded with a status of 422")


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Server:
    def __init__(self, kiln, work):
        self.port_file = os.path.join(work, "port")
        self.log = open(os.path.join(work, "serve.log"), "wb")
        self.process = subprocess.Popen(
            [kiln, "serve", "--data-dir", os.path.join(work, "data"), "--port", "0", "--port-file", self.port_file,
             "--workers", "1"], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.exists(self.port_file):
                break
            if self.process.poll() is not None:
                raise RuntimeError("kiln serve exited before listening")
            time.sleep(0.1)
        with open(self.port_file) as f:
            self.base = "http://127.0.0.1:%d" % int(f.read())

    def get_json(self, path):
        with urllib.request.urlopen(self.base + path, timeout=10) as r:
            return json.load(r)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def main():
    kiln, examples, shots = sys.argv[1:4]
    chromium = chromium_path()
    if chromium is None:
        print("SKIP: Chromium is not installed (scripts/setup.sh --tests installs chromium, chromium-driver and "
              "python3-selenium)")
        return SKIP
    # With Chromium present, a missing driver or binding is a broken set-up, not a reason to skip.
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver_path = shutil.which("chromedriver")
    if driver_path is None:
        raise RuntimeError("chromium is installed but chromedriver is not (Debian package chromium-driver)")

    os.makedirs(shots, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kiln-web-form-")
    downloads = os.path.join(work, "downloads")
    os.makedirs(downloads)
    server = Server(kiln, work)
    driver = None
    started = time.monotonic()
    try:
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--window-size=1280,1000", "--lang=en-US"):
            options.add_argument(arg)
        options.add_experimental_option("prefs", {"download.default_directory": downloads,
                                                  "download.prompt_for_download": False})
        # performance: the DevTools network events, to see the headers and URLs the page sent.
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
        # The page re-renders parts of itself (the inputs table once the model is read): an element
        # found a moment before may be gone, so the waits look again (CI once read a replaced row).
        stale = (StaleElementReferenceException,)
        wait = WebDriverWait(driver, 20, ignored_exceptions=stale)
        by_id = lambda i: driver.find_element(By.ID, i)  # noqa: E731

        driver.get(server.base + "/")
        # The module ran: the description document is generated from the (empty) form.
        wait.until(lambda d: by_id("description-doc").get_property("value").strip().startswith("{"))

        # Every control has a label (its own <label>, or aria-label for the table's cells).
        unlabelled = driver.execute_script(
            "return [...document.querySelectorAll('input, select, textarea')]"
            ".filter(e => e.labels.length === 0 && !e.getAttribute('aria-label') && e.type !== 'radio' && e.type !== 'checkbox' || "
            "(e.type === 'radio' || e.type === 'checkbox') && e.closest('label') === null).map(e => e.id || e.name)")
        assert not unlabelled, "controls without a label: %s" % unlabelled

        # A token, as `--auth tokens` would need (this server runs with --auth none and ignores it):
        # every API call must send it as a bearer header, downloads included, and no URL may hold it.
        driver.get_log("performance")  # drained: the calls the page made before the token do not count
        driver.find_element(By.CSS_SELECTOR, "#access summary").click()
        by_id("api-token").send_keys(TOKEN + Keys.TAB)
        assert driver.execute_script("return sessionStorage.getItem('kiln.apiToken')") == TOKEN

        # The model's input comes from the file.
        by_id("model-file").send_keys(os.path.join(examples, "fashion-mnist", "model.onnx"))
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#inputs-rows .input-name").get_property("value") == "input")
        shape = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#inputs-rows .input-shape").get_property("value"))
        assert shape == "batch, 1, 28, 28", "input shape read from the model: %r" % shape
        assert by_id("job-name").get_property("value") == "model", by_id("job-name").get_property("value")

        # An invalid name: the API's 422 is shown next to the name field.
        by_id("job-name").clear()
        by_id("job-name").send_keys("Fashion MNIST!")
        by_id("submit").click()
        wait.until(lambda d: by_id("job-name-error").is_displayed())
        assert "/name" in by_id("job-name-error").text, by_id("job-name-error").text
        assert by_id("job-name").get_attribute("aria-invalid") == "true"
        assert by_id("form-errors").is_displayed()

        # The real job: constraints, a target described in the form.
        by_id("job-name").clear()
        by_id("job-name").send_keys("fashion-classifier")
        for field, value in (("max-latency", "10"), ("max-accuracy-drop", "0.01"), ("max-memory", "512"),
                             ("target-name", "local-cpu"), ("target-cpu-model", "x86-64 (2 vCPU)"),
                             ("target-cores", "2"), ("target-memory", "8")):
            by_id(field).clear()
            by_id(field).send_keys(value)
        Select(by_id("target-kind")).select_by_value("local")
        Select(by_id("target-scheduler")).select_by_value("none")
        Select(by_id("target-runtime")).select_by_value("docker")
        driver.find_element(By.CSS_SELECTOR, "input[name=objective][value=throughput]").click()
        # A target error is shown at its field too (the description is valid now).
        by_id("target-cores").clear()
        by_id("target-cores").send_keys("0")
        by_id("submit").click()
        wait.until(lambda d: by_id("target-cores-error").is_displayed())
        assert "/node/cpu/cores" in by_id("target-cores-error").text, by_id("target-cores-error").text
        assert not by_id("job-name-error").is_displayed(), "the name's error was not cleared"
        by_id("target-cores").clear()
        by_id("target-cores").send_keys("2")

        description = json.loads(by_id("description-doc").get_property("value"))
        assert description["constraints"] == {"max_latency_ms": 10, "max_accuracy_drop": 0.01, "max_memory_mb": 512}, description
        assert description["inputs"] == {"input": {"shape": ["batch", 1, 28, 28], "dtype": "float32"}}, description
        target = json.loads(by_id("target-doc").get_property("value"))
        assert target["node"] == {"cpu": {"model": "x86-64 (2 vCPU)", "cores": 2}, "memory_gb": 8}, target
        by_id("submit").click()

        # Progress reaches 100% with every stage done.
        WebDriverWait(driver, 240, poll_frequency=0.25, ignored_exceptions=stale).until(
            lambda d: by_id("job-progress").get_property("value") == 100 or
            by_id("job-state").text in ("failed", "cancelled"))
        job_id = by_id("job-id").text
        states = [li.get_attribute("data-state") for li in driver.find_elements(By.CSS_SELECTOR, "#stage-list li")]
        assert by_id("job-state").text == "succeeded", "job %s: %s %s" % (job_id, by_id("job-state").text, by_id("job-status").text)
        assert states and all(s == "done" for s in states), states
        assert by_id("job-progress-text").text == "100%"

        # The report: chart, stages, artifacts.
        wait.until(ec.visibility_of_element_located((By.ID, "report-section")))
        assert driver.find_elements(By.CSS_SELECTOR, "#report-view svg.chart"), "no chart in the report"
        assert "fashion-classifier" in by_id("report-heading").text
        links = {a.text: a for a in driver.find_elements(By.CSS_SELECTOR, "#report-view a.artifact")}
        assert "model.kiln" in links and "image.oci.tar" in links, sorted(links)

        # The job is listed under the recent jobs, linked to its #job= address.
        recent = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#jobs-list a[href='#job=%s']" % job_id)))
        assert recent.text == "fashion-classifier", recent.text

        # Download the compiled plan; it must be the artifact the API lists.
        listed = {a["name"]: a for a in server.get_json("/v1/jobs/%s/artifacts" % job_id)["artifacts"]}
        links["model.kiln"].click()
        path = os.path.join(downloads, "model.kiln")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (os.path.exists(path) and os.path.getsize(path) == listed["model.kiln"]["bytes"]):
            time.sleep(0.1)
        assert os.path.exists(path), "the download did not arrive: %s" % os.listdir(downloads)
        with open(path, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == listed["model.kiln"]["sha256"], "downloaded bytes differ"

        # The whole page, for people to look at.
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1280, min(height + 100, 8000))
        shot = os.path.join(shots, "web_form_report.png")
        driver.save_screenshot(shot)

        requests = []
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                requests.append(message["params"]["request"])
        assert not [r["url"] for r in requests if TOKEN in r["url"]], "a URL holds the token"
        api_calls = [r for r in requests if r["url"].startswith(server.base + "/v1/")]
        without = ["%s %s" % (r["method"], r["url"]) for r in api_calls
                   if {k.lower(): v for k, v in r["headers"].items()}.get("authorization") != "Bearer " + TOKEN]
        assert not without, "API calls without the bearer token: %s" % without
        sent = {"%s %s" % (r["method"], r["url"][len(server.base):]) for r in api_calls}
        for call in ("POST /v1/jobs", "GET /v1/jobs/%s/events" % job_id, "GET /v1/jobs/%s/report?format=html" % job_id,
                     "GET /v1/jobs/%s/artifacts/model.kiln" % job_id):
            assert call in sent, "%s was not sent: %s" % (call, sorted(sent))

        # The report on its own page (a browser's navigation asks for text/html): no console errors
        # there either, checked below with the rest.
        page = driver.current_url
        driver.get("%s/v1/jobs/%s/report" % (server.base, job_id))
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "main#report svg.chart")))
        assert driver.find_elements(By.CSS_SELECTOR, "main#report a.artifact[download]"), "no artifact links"
        driver.get(page)  # back to the form, which shows the job again from its #job= address
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#report-view svg.chart")))

        errors = [e for e in driver.get_log("browser")
                  if e["level"] == "SEVERE" and not any(x in e["message"] for x in EXPECTED_NETWORK_ERRORS)]
        assert not errors, "errors in the browser console:\n" + "\n".join(e["message"] for e in errors)
        print("ok: job %s succeeded in the browser; screenshot %s; %.1f s" % (job_id, shot, time.monotonic() - started))
        return 0
    except Exception:
        if driver is not None:
            try:
                driver.save_screenshot(os.path.join(shots, "web_form_failure.png"))
                for e in driver.get_log("browser"):
                    print("console:", e["level"], e["message"], file=sys.stderr)
            except Exception as e:  # the browser itself may be gone
                print("no screenshot: %s" % e, file=sys.stderr)
        server.stop()
        with open(os.path.join(work, "serve.log"), errors="replace") as f:
            print("== kiln serve log\n" + f.read(), file=sys.stderr)
        raise
    finally:
        if driver is not None:
            driver.quit()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
