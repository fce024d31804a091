//! `SmtpSink`: a real SMTP server on 127.0.0.1 that keeps every message it
//! is given, for black-box tests of mail.
//!
//! It speaks just enough SMTP for lettre (greeting, EHLO/HELO, MAIL FROM,
//! RCPT TO, DATA with dot-unstuffing, RSET, NOOP, QUIT) and runs on its own
//! thread with its own tokio runtime, so it answers even while the test's
//! current-thread runtime is busy. Dropping the sink stops it.
#![allow(dead_code, reason = "the tests use part of the sink's API")]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::{engine::general_purpose::STANDARD, Engine};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Longest command or data line accepted, and largest message kept.
const LINE_BYTES_MAX: usize = 4_096;
const MESSAGE_BYTES_MAX: usize = 1 << 20;
/// How often `wait_for` looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// One message as the sink received it.
#[derive(Clone, Debug)]
pub struct Captured {
    /// The envelope sender (MAIL FROM), without angle brackets.
    pub from: String,
    /// The envelope recipients (RCPT TO), without angle brackets.
    pub to: Vec<String>,
    /// The message after dot-unstuffing, as `Message::formatted()` gave it:
    /// headers, blank line, encoded body, lines ending in CRLF.
    pub data: String,
}

impl Captured {
    /// The first header of that name (any case), unfolded, with RFC 2047
    /// base64 words (`=?utf-8?b?...?=`, what lettre writes) decoded.
    pub fn header(&self, name: &str) -> Option<String> {
        header_in(&self.data, name)
    }

    pub fn subject(&self) -> Option<String> {
        self.header("Subject")
    }

    /// The body decoded from its Content-Transfer-Encoding, with LF line
    /// ends (the text as the sender wrote it).
    pub fn text(&self) -> String {
        eml_text(&self.data)
    }
}

/// A running sink; see the module documentation.
pub struct SmtpSink {
    address: SocketAddr,
    captured: Arc<Mutex<Vec<Captured>>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SmtpSink {
    /// A sink that accepts every message.
    pub async fn start() -> SmtpSink {
        SmtpSink::start_with(false).await
    }

    /// A sink that answers every RCPT TO with 550 (a refusing server).
    pub async fn start_rejecting() -> SmtpSink {
        SmtpSink::start_with(true).await
    }

    async fn start_with(reject_recipients: bool) -> SmtpSink {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the SMTP sink");
        listener.set_nonblocking(true).expect("nonblocking");
        let address = listener.local_addr().expect("address");
        let captured = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = oneshot::channel();
        let kept = Arc::clone(&captured);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("sink runtime");
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("tokio listener");
                tokio::select! {
                    _ = stopped => {}
                    _ = accept_loop(listener, kept, reject_recipients) => {}
                }
            });
        });
        SmtpSink {
            address,
            captured,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `smtp://127.0.0.1:PORT`, for TERN_SMTP_URL.
    pub fn url(&self) -> String {
        format!("smtp://{}", self.address)
    }

    /// Every message so far, in order of arrival.
    pub fn messages(&self) -> Vec<Captured> {
        self.captured
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until `count` messages addressed to `to` (envelope, any case)
    /// have arrived and answers them; panics at the deadline.
    pub async fn wait_for(&self, to: &str, count: usize, timeout: Duration) -> Vec<Captured> {
        let deadline = Instant::now() + timeout;
        loop {
            let found: Vec<Captured> = self
                .messages()
                .into_iter()
                .filter(|m| m.to.iter().any(|rcpt| rcpt.eq_ignore_ascii_case(to)))
                .collect();
            if found.len() >= count {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {count} message(s) to {to} after {timeout:?}; all: {:?}",
                found.len(),
                self.messages()
            );
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    captured: Arc<Mutex<Vec<Captured>>>,
    reject_recipients: bool,
) {
    while let Ok((stream, _)) = listener.accept().await {
        let captured = Arc::clone(&captured);
        tokio::spawn(async move {
            // A client that goes away mid-session is not the sink's problem.
            let _ = session(stream, captured, reject_recipients).await;
        });
    }
}

/// One SMTP session, until QUIT or the client hangs up.
async fn session(
    stream: TcpStream,
    captured: Arc<Mutex<Vec<Captured>>>,
    reject_recipients: bool,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    write.write_all(b"220 sink.test ESMTP ready\r\n").await?;
    let mut from: Option<String> = None;
    let mut to: Vec<String> = Vec::new();
    while let Some(line) = read_line(&mut lines).await? {
        let verb = line.get(..4).unwrap_or(&line).to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" => b"250-sink.test\r\n250 8BITMIME\r\n",
            "HELO" => b"250 sink.test\r\n",
            "MAIL" => {
                from = Some(angle_address(&line));
                to.clear();
                b"250 OK\r\n"
            }
            "RCPT" if from.is_none() => b"503 MAIL first\r\n",
            "RCPT" if reject_recipients => b"550 no such user here\r\n",
            "RCPT" => {
                to.push(angle_address(&line));
                b"250 OK\r\n"
            }
            "DATA" if to.is_empty() => b"503 RCPT first\r\n",
            "DATA" => {
                write
                    .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                    .await?;
                let Some(data) = read_data(&mut lines).await? else {
                    return Ok(());
                };
                let message = Captured {
                    from: from.take().unwrap_or_default(),
                    to: std::mem::take(&mut to),
                    data,
                };
                captured
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(message);
                b"250 OK queued\r\n"
            }
            "RSET" => {
                from = None;
                to.clear();
                b"250 OK\r\n"
            }
            "NOOP" => b"250 OK\r\n",
            "QUIT" => {
                write.write_all(b"221 Bye\r\n").await?;
                return Ok(());
            }
            _ => b"502 Command not implemented\r\n",
        };
        write.write_all(reply).await?;
    }
    Ok(())
}

/// One line without its CRLF; `None` at end of stream.
async fn read_line(
    lines: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> std::io::Result<Option<String>> {
    let mut bytes = Vec::new();
    let read = (&mut *lines)
        .take(LINE_BYTES_MAX as u64)
        .read_until(b'\n', &mut bytes)
        .await?;
    if read == 0 {
        return Ok(None);
    }
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The DATA section up to the lone `.` line, dot-unstuffed, CRLF line ends.
async fn read_data(
    lines: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> std::io::Result<Option<String>> {
    let mut data = String::new();
    loop {
        let Some(line) = read_line(lines).await? else {
            return Ok(None);
        };
        if line == "." {
            // lettre writes CRLF before the terminating `.` even after a
            // message that ends in CRLF; drop that empty line so `data` is
            // what `Message::formatted()` gave (the outbox file's bytes).
            if data.ends_with("\r\n\r\n") {
                data.truncate(data.len() - 2);
            }
            return Ok(Some(data));
        }
        let line = line.strip_prefix('.').unwrap_or(&line);
        if data.len() + line.len() < MESSAGE_BYTES_MAX {
            data.push_str(line);
            data.push_str("\r\n");
        }
    }
}

/// `x@y` from `MAIL FROM:<x@y> BODY=8BITMIME` or `RCPT TO:<x@y>`.
fn angle_address(line: &str) -> String {
    let start = line.find('<').map_or(0, |i| i + 1);
    let end = line[start..].find('>').map_or(line.len(), |i| start + i);
    line[start..end].trim().to_owned()
}

/// The first header called `name` in a raw message, unfolded and with
/// base64 encoded words decoded.
pub fn header_in(raw: &str, name: &str) -> Option<String> {
    let (head, _) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let unfolded = head.replace("\r\n ", " ").replace("\r\n\t", " ");
    unfolded.split("\r\n").find_map(|line| {
        let (field, value) = line.split_once(':')?;
        field
            .trim()
            .eq_ignore_ascii_case(name)
            .then(|| decode_words(value.trim()))
    })
}

/// The body of a raw message (an `.eml` file or what the sink captured),
/// decoded from its Content-Transfer-Encoding (7bit, 8bit,
/// quoted-printable or base64), with LF line ends.
pub fn eml_text(raw: &str) -> String {
    let raw = raw.replace("\r\n", "\n").replace('\n', "\r\n");
    let (_, body) = raw.split_once("\r\n\r\n").unwrap_or(("", &raw));
    let encoding = header_in(&raw, "Content-Transfer-Encoding")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let bytes = match encoding.as_str() {
        "quoted-printable" => decode_quoted_printable(body),
        "base64" => {
            let compact: String = body.split_whitespace().collect();
            STANDARD.decode(compact).expect("a base64 body")
        }
        _ => body.as_bytes().to_vec(),
    };
    String::from_utf8(bytes)
        .expect("a UTF-8 body")
        .replace("\r\n", "\n")
}

fn decode_quoted_printable(body: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'=' if bytes[i + 1..].starts_with(b"\r\n") => i += 3,
            b'=' if bytes[i + 1..].starts_with(b"\n") => i += 2,
            b'=' => {
                let hex = body.get(i + 1..i + 3).expect("=XX in quoted-printable");
                out.push(u8::from_str_radix(hex, 16).expect("hex after ="));
                i += 3;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

/// Decodes `=?charset?b?...?=` words; other text is kept as it is.
fn decode_words(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    let mut after_word = false;
    while let Some(start) = rest.find("=?") {
        let word = &rest[start..];
        let parts: Vec<&str> = word[2..].splitn(3, '?').collect();
        let decoded = match parts.as_slice() {
            [_charset, encoding, tail] if encoding.eq_ignore_ascii_case("b") => tail
                .find("?=")
                .and_then(|end| Some((STANDARD.decode(&tail[..end]).ok()?, end)))
                .and_then(|(bytes, end)| Some((String::from_utf8(bytes).ok()?, end))),
            _ => None,
        };
        let Some((text, end)) = decoded else {
            out.push_str(&rest[..start + 2]);
            rest = &rest[start + 2..];
            after_word = false;
            continue;
        };
        // Whitespace between two encoded words is not part of the text.
        let before = &rest[..start];
        if !(after_word && before.trim().is_empty()) {
            out.push_str(before);
        }
        out.push_str(&text);
        after_word = true;
        // `=?` + charset + `?b?` + payload + `?=`
        let consumed = 2 + parts[0].len() + 1 + parts[1].len() + 1 + end + 2;
        rest = &rest[start + consumed..];
    }
    out.push_str(rest);
    out
}

/// The value after `token=` in a link inside `text`, up to the first
/// character that cannot be part of it.
pub fn token_in(text: &str) -> Option<String> {
    let start = text.find("token=")? + "token=".len();
    let token: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '%'))
        .collect();
    (!token.is_empty()).then_some(token)
}

#[test]
fn decoding_handles_each_transfer_encoding() {
    let qp = "Content-Transfer-Encoding: quoted-printable\r\n\r\nJos=C3=A9 http://x/v?token=3D=\r\nab-c_1\r\n";
    assert_eq!(eml_text(qp), "José http://x/v?token=ab-c_1\n");
    assert_eq!(token_in(&eml_text(qp)).as_deref(), Some("ab-c_1"));
    let b64 = "Content-Transfer-Encoding: base64\r\n\r\nSm9zw6kK\r\n";
    assert_eq!(eml_text(b64), "José\n");
    let plain = "Subject: =?utf-8?b?Sm9zw6k=?= =?utf-8?b?IMOp?=\r\nContent-Transfer-Encoding: 7bit\r\n\r\nhi\r\n";
    assert_eq!(eml_text(plain), "hi\n");
    assert_eq!(header_in(plain, "subject").as_deref(), Some("José é"));
    assert_eq!(token_in("no link"), None);
}
