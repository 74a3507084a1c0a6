"""The Wayland global shortcut: the XDG desktop portal's ``GlobalShortcuts`` interface, over
D-Bus with jeepney.

A Wayland compositor lets no client take a key from the others; a desktop that offers the
portal's GlobalShortcuts interface (KDE Plasma 5.27 and later, GNOME 48 and later,
Hyprland's portal) binds one for the app instead: it shows its own dialog, where the person
confirms the key the app prefers or picks another, and then signals each press. D-Bus is
spoken with jeepney (pure Python) because the desktop build leaves Qt's QtDBus out for
size. Where there is no session bus, no portal, or a portal without the interface,
:meth:`PortalShortcut.start` refuses with the line that says to bind the app's command in
the desktop's keyboard settings (docs/desktop.md), as the app did before it knew the portal.

The calls follow the portal's request pattern: subscribe to ``Request.Response`` on the
request's predictable path (``/org/freedesktop/portal/desktop/request/SENDER/TOKEN``)
before the call, so the answer cannot come before the subscription, then wait for it.
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import threading
import time
from collections.abc import Callable, Mapping

from .keyspec import MODIFIERS, Keys, ShortcutError, bind_advice
from .x11keys import keysym_name

logger = logging.getLogger(__name__)

PORTAL = "org.freedesktop.portal.Desktop"
"""The portal's well-known name on the session bus."""
PORTAL_PATH = "/org/freedesktop/portal/desktop"
INTERFACE = "org.freedesktop.portal.GlobalShortcuts"
SHORTCUT_ID = "translate"
"""The one shortcut the app binds, by the id the desktop stores it under."""
DESCRIPTION = "Translate the selection"
"""What the desktop's dialog and settings call the shortcut."""
CALL_TIMEOUT = 25.0
"""Seconds a method call may take (D-Bus's own default)."""
ANSWER_TIMEOUT = 300.0
"""Seconds the desktop may take to answer a request: a person answers its dialog."""
CLOSE_TIMEOUT = 2.0
"""Seconds :meth:`PortalShortcut.stop` waits for the portal to close the session."""

#: The portal's response codes other than 0 (success), as a refusal names them.
_RESPONSES = {1: "cancelled", 2: "ended by the desktop"}
#: The XDG shortcuts spec's modifier names, by :class:`Keys`'s.
_XDG_MODIFIERS = {"ctrl": "CTRL", "alt": "ALT", "shift": "SHIFT", "super": "LOGO"}


def xdg_trigger(keys: Keys) -> str:
    """The combination as the XDG shortcuts spec writes a trigger: ``CTRL+ALT+e``, ``LOGO+F9``.

    Modifiers in capitals (``LOGO`` for super), the key by its xkb keysym name.
    """
    return "+".join([_XDG_MODIFIERS[m] for m in MODIFIERS if m in keys.modifiers] + [keysym_name(keys)])


def session_bus_address(environ: Mapping[str, str]) -> str | None:
    """The session bus's address: ``DBUS_SESSION_BUS_ADDRESS``, or the socket that systemd's
    user bus keeps in ``XDG_RUNTIME_DIR`` (where libdbus and GLib look too); ``None`` if neither."""
    address = environ.get("DBUS_SESSION_BUS_ADDRESS", "").strip()
    if address:
        return address
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.exists(os.path.join(runtime, "bus")):
        return f"unix:path={os.path.join(runtime, 'bus')}"
    return None


def wayland_refusal(keys: Keys, why: str) -> str:
    """The one line where the desktop offers no global shortcut: why, and the command to bind."""
    return (f"global shortcut {keys}: a Wayland desktop lets no program take a global shortcut unless it "
            f"offers the GlobalShortcuts portal, and this one does not ({why}); "
            + bind_advice("the desktop's keyboard settings"))


class PortalShortcut:
    """Binds one key combination through the desktop portal for as long as it runs.

    :meth:`start` waits while the desktop shows its dialog (the caller's thread is held
    until the person answers, at most ``answer_timeout`` seconds); presses then arrive on a
    thread of the shortcut's own.

    Args:
        keys: The combination the app prefers; the desktop may bind another.
        address: The session bus's address (:func:`session_bus_address`); ``None`` when
            there is none.
        answer_timeout: Seconds the desktop may take to answer a request.
    """

    def __init__(self, keys: Keys, address: str | None, answer_timeout: float = ANSWER_TIMEOUT):
        self.keys = keys
        self.address = address
        self.answer_timeout = answer_timeout
        self.trigger: str | None = None
        """The key the desktop bound, as it describes it (``"Ctrl+Alt+E"``), once started."""
        self._connection = None
        self._router = None
        self._activations = None
        self._session: str | None = None
        self._thread: threading.Thread | None = None

    def start(self, on_press: Callable[[], None]) -> None:
        """Ask the desktop for the combination and call ``on_press`` (from the shortcut's
        thread) once per press; nothing happens if it is started already.

        Raises:
            ShortcutError: No session bus, no portal, or no GlobalShortcuts in it (the line
                says to bind the command in the desktop's settings); the person cancelled
                the desktop's dialog, or the desktop did not answer. One line.
        """
        if self._thread is not None:
            return
        if self.address is None:
            raise ShortcutError(wayland_refusal(self.keys, "no session bus"))
        try:
            from jeepney.io.threading import DBusRouter, open_dbus_connection
        except ImportError:
            raise ShortcutError(wayland_refusal(self.keys, "jeepney, of the gui extra, is not installed")) from None
        try:
            connection = open_dbus_connection(self.address)
        except Exception as error:  # a bad address, no socket, a failed handshake: all mean no bus
            raise ShortcutError(wayland_refusal(self.keys, f"cannot reach the session bus: {error}")) from None
        router = DBusRouter(connection)
        try:
            owner = self._portal_owner(router)
            activations = self._listen_for_presses(router, owner)
            try:
                session = self._create_session(router, owner)
                try:
                    self.trigger = self._bind(router, owner, session)
                except BaseException:
                    _close_session(router, session)
                    raise
            except BaseException:
                activations.close()
                raise
        except BaseException:
            router.close()
            connection.close()
            raise
        self._connection, self._router, self._activations, self._session = connection, router, activations, session
        self._thread = threading.Thread(target=self._run, args=(activations.queue, session, on_press),
                                        name=f"portal-shortcut {self.keys}", daemon=True)
        self._thread.start()
        logger.info("global shortcut %s bound by the desktop portal as %s", self.keys, self.trigger or "no key yet")

    def stop(self) -> None:
        """Close the portal session, end the thread and the connection; nothing happens if
        it is not running."""
        if self._thread is None:
            return
        self._activations.queue.put(None)
        self._thread.join()
        self._activations.close()
        _close_session(self._router, self._session)
        self._router.close()
        self._connection.close()
        self._thread = self._connection = self._router = self._activations = self._session = None
        logger.info("global shortcut %s: the portal session is closed", self.keys)

    # -- the portal's calls ---------------------------------------------------------------

    def _portal_owner(self, router) -> str:
        """The portal's unique name, once its GlobalShortcuts interface is known to be there.

        Signals carry the unique name, not the well-known one, and jeepney matches them on
        this side; asking for the version first also starts a portal that D-Bus activates.
        """
        from jeepney import DBusAddress, Properties
        from jeepney.bus_messages import message_bus
        from jeepney.io.threading import Proxy
        from jeepney.wrappers import DBusErrorResponse, unwrap_msg

        portal = DBusAddress(PORTAL_PATH, PORTAL, INTERFACE)
        try:
            (_, version), = unwrap_msg(router.send_and_get_reply(Properties(portal).get("version"),
                                                                 timeout=CALL_TIMEOUT))
            owner, = Proxy(message_bus, router, timeout=CALL_TIMEOUT).GetNameOwner(PORTAL)
        except DBusErrorResponse as error:
            why = ("no desktop portal on the session bus" if error.name in (
                "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner")
                else f"its portal has no {INTERFACE}")
            raise ShortcutError(wayland_refusal(self.keys, why)) from None
        except TimeoutError:
            raise ShortcutError(wayland_refusal(self.keys, f"the desktop portal did not answer in "
                                                           f"{CALL_TIMEOUT:g} s")) from None
        logger.debug("desktop portal %s offers %s version %s", owner, INTERFACE, version)
        return owner

    def _create_session(self, router, owner: str) -> str:
        options = {"session_handle_token": ("s", _token())}
        code, results = self._request(router, owner, "CreateSession", "a{sv}", (options,), options)
        if code != 0:
            raise ShortcutError(f"the desktop did not open a global shortcut session for {self.keys} "
                                f"({_RESPONSES.get(code, f'response {code}')}); "
                                + bind_advice("the desktop's keyboard settings"))
        return results["session_handle"][1]

    def _bind(self, router, owner: str, session: str) -> str:
        """Bind the shortcut; the desktop's description of the key it bound ("" for none yet)."""
        shortcut = (SHORTCUT_ID, {"description": ("s", DESCRIPTION), "preferred_trigger": ("s", xdg_trigger(self.keys))})
        options: dict = {}
        code, results = self._request(router, owner, "BindShortcuts", "oa(sa{sv})sa{sv}",
                                      (session, [shortcut], "", options), options)
        bound = {ident: properties for ident, properties in results.get("shortcuts", ("", []))[1]}
        if code != 0 or SHORTCUT_ID not in bound:
            why = _RESPONSES.get(code, f"response {code}") if code != 0 else "it bound no such shortcut"
            raise ShortcutError(f"the desktop did not grant the global shortcut {self.keys} ({why}); set it in "
                                "Settings again to be asked again, or " + bind_advice("the desktop's keyboard settings"))
        return bound[SHORTCUT_ID].get("trigger_description", ("s", ""))[1]

    def _request(self, router, owner: str, method: str, signature: str, body: tuple, options: dict):
        """Call ``method``, which answers with a Request, and wait for its Response.

        ``options`` is the call's options dictionary (inside ``body``): it gets the handle
        token whose request path is subscribed to before the call.

        Returns:
            The response code and the results, their variants as ``(signature, value)``.
        """
        from jeepney import DBusAddress, MatchRule, new_method_call
        from jeepney.bus_messages import message_bus
        from jeepney.io.threading import Proxy
        from jeepney.wrappers import DBusErrorResponse, unwrap_msg

        token = _token()
        options["handle_token"] = ("s", token)
        sender = router.unique_name.lstrip(":").replace(".", "_")
        expected = f"{PORTAL_PATH}/request/{sender}/{token}"
        bus = Proxy(message_bus, router, timeout=CALL_TIMEOUT)
        matches = [MatchRule(type="signal", sender=owner, interface="org.freedesktop.portal.Request",
                             member="Response", path=expected)]
        # on this side the path is checked below, so that an older portal's other path counts too
        local = MatchRule(type="signal", sender=owner, interface="org.freedesktop.portal.Request", member="Response")
        with router.filter(local, queue=queue.Queue()) as responses:
            bus.AddMatch(matches[0])
            try:
                try:
                    handle, = unwrap_msg(router.send_and_get_reply(
                        new_method_call(DBusAddress(PORTAL_PATH, PORTAL, INTERFACE), method, signature, body),
                        timeout=CALL_TIMEOUT))
                except (DBusErrorResponse, TimeoutError) as error:
                    raise ShortcutError(f"global shortcut {self.keys}: the desktop portal's {method} failed "
                                        f"({error}); " + bind_advice("the desktop's keyboard settings")) from None
                if handle != expected:
                    matches.append(MatchRule(type="signal", sender=owner, interface="org.freedesktop.portal.Request",
                                             member="Response", path=handle))
                    bus.AddMatch(matches[-1])
                return self._response(router, responses, handle, method)
            finally:
                for rule in matches:
                    bus.RemoveMatch(rule)

    def _response(self, router, responses: queue.Queue, handle: str, method: str):
        from jeepney import DBusAddress, new_method_call

        deadline = time.monotonic() + self.answer_timeout
        while True:
            try:
                message = responses.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                # dismiss the dialog that no one answered
                router.send(new_method_call(DBusAddress(handle, PORTAL, "org.freedesktop.portal.Request"), "Close"))
                raise ShortcutError(f"global shortcut {self.keys}: the desktop did not answer {method} within "
                                    f"{self.answer_timeout:g} s; set it in Settings again, or "
                                    + bind_advice("the desktop's keyboard settings")) from None
            if message.header.fields.get(_path_field()) == handle:
                code, results = message.body
                return code, results

    def _listen_for_presses(self, router, owner: str):
        """A filter whose queue gets every Activated signal of the portal (subscribed on the bus)."""
        from jeepney import MatchRule
        from jeepney.bus_messages import message_bus
        from jeepney.io.threading import Proxy

        rule = MatchRule(type="signal", sender=owner, interface=INTERFACE, member="Activated", path=PORTAL_PATH)
        activations = router.filter(rule, queue=queue.Queue())
        Proxy(message_bus, router, timeout=CALL_TIMEOUT).AddMatch(rule)
        return activations

    def _run(self, activations: queue.Queue, session: str, on_press: Callable[[], None]) -> None:
        while True:
            message = activations.get()
            if message is None:
                return
            session_handle, shortcut_id = message.body[:2]
            if session_handle != session or shortcut_id != SHORTCUT_ID:
                continue
            try:
                on_press()
            except Exception:
                logger.exception("global shortcut %s: the handler failed", self.keys)


def _token() -> str:
    """A request or session token: a valid object path element, unique to this call."""
    return f"edge_translator_{secrets.token_hex(8)}"


def _path_field():
    from jeepney.low_level import HeaderFields

    return HeaderFields.path


def _close_session(router, session: str) -> None:
    """Close the portal session; a portal that is gone or slow is logged, not raised."""
    from jeepney import DBusAddress, new_method_call
    from jeepney.wrappers import unwrap_msg

    try:
        unwrap_msg(router.send_and_get_reply(
            new_method_call(DBusAddress(session, PORTAL, "org.freedesktop.portal.Session"), "Close"),
            timeout=CLOSE_TIMEOUT))
    except Exception as error:  # the portal or the bus may be gone at quit
        logger.warning("global shortcut: closing the portal session %s failed: %s", session, error)
