"""examples/nginx.conf as written, in a real nginx in front of a real daemon: the platform's
signed callbacks arrive over TLS, the console is reached by its public name with a
``Secure`` session cookie, and other names reach nothing.

Only the ports, the certificate paths and the two server names are replaced (each must be
found in the file, so an edit of the example that a reader would follow fails here).
nginx comes from Debian's packages (``.ci/run`` installs ``nginx-light``); a self-signed
certificate for both names is made here with ``cryptography``."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import re
import ssl
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gensokyo_idmap.testing import (
    EmulatedPlatform,
    WebhookSender,
    daemon_config,
    free_port,
    running_daemon,
)
from gensokyo_idmap.testing.platform_emulator import APP, SECRET, group_message
from gensokyo_idmap.testing.wait import until_listening

from ..conftest import run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "nginx.conf"
NGINX = Path("/usr/sbin/nginx")
BOT, CONSOLE = "bot.example.com", "console.example.com"
TOKEN = "s3cret-console-token"

pytestmark = pytest.mark.skipif(not NGINX.exists(),
                                reason="no nginx: `apt-get install nginx-light` "
                                       "(.ci/run installs it)")


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for both names and its key, as PEM files; and a context trusting it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, BOT)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName(BOT), x509.DNSName(CONSOLE),
                 x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def rendered_example(tls_port: int, webhook_port: int, api_port: int, cert: Path,
                     key: Path) -> str:
    """The example with this test's ports and certificate; every replaced text must be
    there as the example's readers see it."""
    text = EXAMPLE.read_text(encoding="utf-8")
    replacements = {
        "listen 443 ssl;": f"listen 127.0.0.1:{tls_port} ssl;",
        "proxy_pass http://127.0.0.1:8443;": f"proxy_pass http://127.0.0.1:{webhook_port};",
        "proxy_pass http://127.0.0.1:15631;": f"proxy_pass http://127.0.0.1:{api_port};",
        f"/etc/letsencrypt/live/{BOT}/fullchain.pem": str(cert),
        f"/etc/letsencrypt/live/{BOT}/privkey.pem": str(key),
        f"/etc/letsencrypt/live/{CONSOLE}/fullchain.pem": str(cert),
        f"/etc/letsencrypt/live/{CONSOLE}/privkey.pem": str(key),
    }
    for old, new in replacements.items():
        assert old in text, f"examples/nginx.conf no longer holds {old!r}"
        text = text.replace(old, new)
    return text


def nginx_main_config(workdir: Path, server_blocks: str) -> Path:
    """A whole nginx.conf around the example (which goes inside ``http {}``): one process in
    the foreground, every file in ``workdir``."""
    (workdir / "servers.conf").write_text(server_blocks, encoding="utf-8")
    temp = {name: workdir / name for name in ("body", "proxy")}
    for path in temp.values():
        path.mkdir()
    main = workdir / "nginx.conf"
    main.write_text(f"""
daemon off;
master_process off;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {workdir}/access.log;
    client_body_temp_path {temp['body']};
    proxy_temp_path {temp['proxy']};
    fastcgi_temp_path {workdir}/fastcgi; uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    include {workdir}/servers.conf;
}}
""", encoding="utf-8")
    return main


@pytest.mark.slow
def test_the_nginx_example_carries_callbacks_and_the_console_over_tls(tmp_path: Path) -> None:
    tls_port, webhook_port, api_port = free_port(), free_port(), free_port()
    cert, key = self_signed(tmp_path)
    nginx_dir = tmp_path / "nginx"
    nginx_dir.mkdir()
    conf = nginx_main_config(nginx_dir, rendered_example(tls_port, webhook_port, api_port,
                                                         cert, key))
    check = subprocess.run([str(NGINX), "-t", "-c", str(conf), "-e", str(nginx_dir / "e.log")],
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr

    trust = ssl.create_default_context(cafile=str(cert))

    async def main() -> None:
        platform = EmulatedPlatform()
        await platform.start()
        proxy = await asyncio.create_subprocess_exec(
            str(NGINX), "-c", str(conf), "-e", str(nginx_dir / "e.log"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        config = daemon_config(
            tmp_path / "data", platform=platform, webhook=f"127.0.0.1:{webhook_port}",
            api=f"127.0.0.1:{api_port}")
        config["api"].update({"allowed_hosts": [CONSOLE], "trusted_proxies": ["127.0.0.1/32"],
                              "token": TOKEN})
        try:
            await until_listening(tls_port)
            async with running_daemon(config, tmp_path, listening=(webhook_port, api_port)), \
                    aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust),
                                          cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
                await through_the_proxy(http, tls_port)
        finally:
            proxy.terminate()
            await asyncio.wait_for(proxy.wait(), 10)
            await platform.close()

    run(main())


async def through_the_proxy(http: aiohttp.ClientSession, tls_port: int) -> None:
    base = f"https://127.0.0.1:{tls_port}"

    def on(name: str) -> dict[str, Any]:
        return {"server_hostname": name, "headers": {"Host": name}}

    # the platform dials the callback URL by its name; nginx's first server (the webhook's)
    # takes what names no server, as the platform's requests here (Host 127.0.0.1:port)
    async with WebhookSender(f"{base}/qqbot", APP, SECRET, session=http) as sender:
        assert (await sender.validate()).ok
        delivery = await sender.dispatch("GROUP_AT_MESSAGE_CREATE", group_message(1))
        assert delivery.status == 200, delivery
    # nothing else of the daemon on the webhook's name
    async with http.get(f"{base}/v1/lookup?vuin=1", **on(BOT)) as resp:
        assert resp.status == 404
    # the console by its public name: the login form, then a Secure session cookie
    async with http.get(f"{base}/ui/login", **on(CONSOLE)) as resp:
        page = await resp.text()
        assert resp.status == 200, page
        assert any("Secure" in c for c in resp.headers.getall("Set-Cookie")), resp.headers
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    # as a browser posts the form: its Origin is the public name, and the proxy's Host too
    async with http.post(f"{base}/ui/login", data={"csrf": found[1], "token": TOKEN},
                         allow_redirects=False, server_hostname=CONSOLE,
                         headers={"Host": CONSOLE, "Origin": f"https://{CONSOLE}",
                                  "Sec-Fetch-Site": "same-origin"}) as resp:
        assert resp.status in (302, 303), await resp.text()
        cookies = resp.headers.getall("Set-Cookie")
        assert any("Secure" in c for c in cookies), cookies
    async with http.get(f"{base}/ui/", **on(CONSOLE)) as resp:
        assert resp.status == 200 and "/ui/login" not in str(resp.url), resp.url
    # another site's page posting to the console through the proxy is refused
    async with http.post(f"{base}/ui/login", data={"csrf": found[1], "token": TOKEN},
                         allow_redirects=False, server_hostname=CONSOLE,
                         headers={"Host": CONSOLE, "Origin": "https://evil.example"}) as resp:
        assert resp.status == 403
    # a name the daemon was not told of (DNS rebinding), even through the proxy's console
    async with http.get(f"{base}/ui/login", server_hostname=CONSOLE,
                        headers={"Host": "evil.example"}) as resp:
        assert resp.status in (404, 421, 403)

